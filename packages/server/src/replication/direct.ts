import type { Socket } from "node:net";
import { join, resolve } from "node:path";
import type { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { isSubvolume } from "../runtime/storage/btrfs.js";
import { type Child, childFailure, startChild } from "./children.js";
import { abortError, ReplicationError } from "./errors.js";
import { assertId } from "./keys.js";
import { exists, type MarkReceiving, StreamCheck, StreamChecker, settleReceive } from "./receive-check.js";

// Issue #15, units that move (docs/SCALE-OUT.md): a checkpoint sent from one node straight to
// another, without the object store on the way: `btrfs send --compressed-data [-p parent]` on the
// node that has it, its bytes over the node endpoint, `btrfs receive` on the other. Extents btrfs
// holds compressed go as they are (send protocol 2): nothing is decompressed, compressed again or
// written twice. The object store keeps its copy of the chain; this is only the fast way across.

/**
 * `btrfs send` of the read-only snapshot `snapshotPath`, incremental against `parentPath` when
 * given (a snapshot the receiving node has too, as itself or as received from it). Its stdout is
 * the stream (a pipe, or `stdout`: relayPair's peer); its `exit` says whether the stream is whole.
 */
export function sendSnapshot(snapshotPath: string, parentPath?: string, stdout?: Socket): Child {
  const args = ["send", "-q", "--compressed-data", ...(parentPath ? ["-p", resolve(parentPath)] : [])];
  return startChild("btrfs", [...args, resolve(snapshotPath)], ["ignore", stdout ?? "pipe", "pipe"]);
}

/**
 * A send stream as a connection's raw bytes until its end (another node's upgraded send: its
 * RelaySocket's `pumpTo`), checked to end with its end command since no framing says it is whole.
 */
export interface RawSendStream {
  pumpTo(out: Writable, look: (chunk: Buffer) => void): Promise<void>;
  destroy(): void;
}

export interface ReceiveSnapshotOptions {
  /** The unit's checkpoint directory: the stream may make `<destDir>/<checkpointId>` only. */
  readonly destDir: string;
  readonly checkpointId: string;
  /** Whether the stream is incremental (a snapshot of a parent already in `destDir`). */
  readonly incremental: boolean;
  /** The stream: a body with its own framing, or a connection's raw bytes until its end. */
  readonly body: Readable | RawSendStream;
  readonly signal?: AbortSignal;
  /** Marks the checkpoint as being received until it is whole (crash safety; the runtime's `receiving`). */
  readonly receiving?: MarkReceiving;
}

/**
 * Receives a send stream as `<destDir>/<checkpointId>` (`btrfs receive --chroot`, checked like an
 * import from the store: its first command must make that subvolume). Nothing of it is left when
 * it fails (a cut stream, a missing parent, an abort). Resolves with the bytes received.
 */
export async function receiveSnapshot(opts: ReceiveSnapshotOptions): Promise<number> {
  const id = assertId(opts.checkpointId, "checkpoint id");
  const destDir = resolve(opts.destDir);
  const path = join(destDir, id);
  // The mark first: a partial snapshot an earlier receive left goes with it.
  let received: (() => Promise<void>) | undefined;
  try {
    received = await opts.receiving?.(id);
  } catch (err) {
    opts.body.destroy();
    throw err;
  }
  let ok = false;
  try {
    if (await exists(path)) throw new ReplicationError("EXISTS", `${path} exists already`);
    const bytes = await receiveInto(opts, id, destDir, path);
    ok = true;
    return bytes;
  } finally {
    opts.body.destroy();
    // The path did not exist before, and the stream could only make `<destDir>/<id>`.
    await settleReceive(path, ok, received);
  }
}

async function receiveInto(opts: ReceiveSnapshotOptions, id: string, destDir: string, path: string): Promise<number> {
  const { signal } = opts;
  if (signal?.aborted) throw abortError(signal, `receive of ${id}`);
  const inner = new AbortController();
  const fail = (err: unknown) => {
    if (!inner.signal.aborted) inner.abort(err);
  };
  const onAbort = () => fail(abortError(signal, `receive of ${id}`));
  signal?.addEventListener("abort", onAbort, { once: true });
  // -e: it stops at the stream's end marker (one subvolume); -E 1: at its first error.
  const receive = startChild("btrfs", ["receive", "-e", "--chroot", "-E", "1", destDir], ["pipe", "ignore", "pipe"]);
  inner.signal.addEventListener("abort", () => receive.kill(), { once: true });
  const body = opts.body;
  // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe"
  const stdin = receive.proc.stdin!;
  let bytes = () => 0;
  let flow: Promise<unknown>;
  if ("pumpTo" in body) {
    const checker = new StreamChecker(id, opts.incremental, true);
    bytes = () => checker.bytes;
    inner.signal.addEventListener("abort", () => body.destroy(), { once: true });
    flow = body.pumpTo(stdin, (chunk) => checker.look(chunk)).then(() => checker.end());
  } else {
    const check = new StreamCheck(id, opts.incremental);
    bytes = () => check.bytes;
    flow = pipeline(body, check, stdin, { signal: inner.signal });
  }
  const tasks = [
    receive.exit.then((e) => {
      const why = childFailure("btrfs receive", e);
      if (why) {
        const code = /cannot find parent subvolume/i.test(e.stderr) ? "PARENT_MISSING" : "RECEIVE_FAILED";
        const err = new ReplicationError(code, why);
        fail(err);
        throw err;
      }
    }),
    flow.catch((err: unknown) => {
      fail(err);
      throw err;
    }),
  ];
  try {
    const results = await Promise.allSettled(tasks);
    if (signal?.aborted) throw abortError(signal, `receive of ${id}`);
    if (inner.signal.aborted) throw inner.signal.reason;
    for (const r of results) if (r.status === "rejected") throw r.reason;
    if (!(await isSubvolume(path))) throw new ReplicationError("RECEIVE_FAILED", `btrfs receive made no ${path}`);
    return bytes();
  } finally {
    receive.kill();
    await receive.exit;
    signal?.removeEventListener("abort", onAbort);
  }
}
