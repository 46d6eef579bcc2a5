import { createHash } from "node:crypto";
import { join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { isSubvolume } from "../runtime/storage/btrfs.js";
import { childFailure, startChild } from "./children.js";
import { abortError, ReplicationError } from "./errors.js";
import { assertId, checkpointKeys } from "./keys.js";
import type { Manifest } from "./manifest.js";
import { readManifest } from "./manifest-io.js";
import type { ObjectStore } from "./object-store.js";
import { exists, type MarkReceiving, StreamCheck, settleReceive } from "./receive-check.js";

export interface ImportProgress {
  checkpointId: string;
  /** Compressed bytes of this checkpoint's stream read and checked so far. */
  bytes: number;
  totalBytes: number;
}

export interface ImportCheckpointOptions {
  store: ObjectStore;
  checkpointId: string;
  /**
   * Where received checkpoints appear, each as the read-only subvolume `<destDir>/<checkpointId>`
   * (a unit's checkpoint directory). One import at a time per directory: the caller serialises.
   */
  destDir: string;
  /**
   * Whether a checkpoint of the chain is on this host already (as the subvolume the incremental
   * stream after it was sent against, or one received from it). Default: `<destDir>/<id>` is a subvolume.
   */
  isPresent?: ((checkpointId: string) => Promise<boolean>) | undefined;
  /** Marks each checkpoint as being received until it is whole (crash safety; the runtime's `receiving`). */
  receiving?: MarkReceiving | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ((p: ImportProgress) => void) | undefined;
}

export interface ImportResult {
  /** The manifest of the checkpoint asked for. */
  manifest: Manifest;
  /** `<destDir>/<checkpointId>`. */
  path: string;
  /** The checkpoints received by this call, oldest first (empty when it was present). */
  received: string[];
}

/**
 * Restores checkpoint `checkpointId` from the store on this host: reads its manifest's chain and
 * receives, oldest first, every checkpoint after the newest one present, each streamed part by
 * part from the store (sha256 checked before a byte of the part goes on) through `zstd -d` into
 * `btrfs receive --chroot` of `destDir`. A checkpoint whose receive fails (checksum, truncated
 * part, receive error, abort) leaves no subvolume; those received before it stay (they are whole).
 */
export async function importCheckpoint(opts: ImportCheckpointOptions): Promise<ImportResult> {
  const checkpointId = assertId(opts.checkpointId, "checkpoint id");
  const destDir = resolve(opts.destDir);
  const { store, signal } = opts;
  const isPresent = opts.isPresent ?? ((id: string) => isSubvolume(join(destDir, id)));
  const target = await readManifest(store, checkpointId, { signal });
  const chain = target.chain;
  let start = chain.length;
  while (start > 0 && !(await isPresent(chain[start - 1] as string))) start--;
  const received: string[] = [];
  for (let i = start; i < chain.length; i++) {
    const id = chain[i] as string;
    const manifest = id === checkpointId ? target : await readManifest(store, id, { signal });
    // Each link's own chain must be the start of the target's: a store cannot splice chains.
    if (manifest.chain.length !== i + 1 || manifest.chain.some((c, j) => c !== chain[j])) {
      throw new ReplicationError("INVALID_MANIFEST", `the chain of ${id} is not the start of ${checkpointId}'s`);
    }
    if (manifest.unitId !== target.unitId) {
      throw new ReplicationError("INVALID_MANIFEST", `${id} is another unit's checkpoint than ${checkpointId}`);
    }
    if (i > 0 && i === start && !(await isPresent(chain[i - 1] as string))) {
      throw new ReplicationError("PARENT_MISSING", `${id} needs ${chain[i - 1]} on this host`);
    }
    await receiveOne(store, manifest, destDir, signal, opts.onProgress, opts.receiving);
    received.push(id);
  }
  return { manifest: target, path: join(destDir, checkpointId), received };
}

/** Receives one checkpoint's stream as `<destDir>/<id>`; nothing is left of it if that fails. */
async function receiveOne(
  store: ObjectStore,
  manifest: Manifest,
  destDir: string,
  signal: AbortSignal | undefined,
  onProgress: ImportCheckpointOptions["onProgress"],
  receiving: MarkReceiving | undefined,
): Promise<void> {
  const id = manifest.checkpointId;
  const path = join(destDir, id);
  // The mark first: a partial snapshot an earlier receive left goes with it.
  const received = await receiving?.(id);
  let ok = false;
  try {
    if (await exists(path)) throw new ReplicationError("EXISTS", `${path} exists already`);
    await receiveStream(store, manifest, path, destDir, signal, onProgress);
    ok = true;
  } finally {
    // The path did not exist before, and the stream could only make `<destDir>/<id>`: what is
    // there now is this receive's partial subvolume.
    await settleReceive(path, ok, received);
  }
}

async function receiveStream(
  store: ObjectStore,
  manifest: Manifest,
  path: string,
  destDir: string,
  signal: AbortSignal | undefined,
  onProgress: ImportCheckpointOptions["onProgress"],
): Promise<void> {
  const id = manifest.checkpointId;
  const keys = checkpointKeys(id);
  const head = await store.headObject(keys.stream, { signal });
  if (!head) throw new ReplicationError("NOT_FOUND", `the stream of ${id} is not in the store`);
  if (head.size !== manifest.compressedBytes) {
    throw new ReplicationError(
      "TRUNCATED",
      `the stream of ${id} is ${head.size} bytes, its manifest says ${manifest.compressedBytes}`,
    );
  }
  if (signal?.aborted) throw abortError(signal, `import of ${id}`);

  const inner = new AbortController();
  const fail = (err: unknown) => {
    if (!inner.signal.aborted) inner.abort(err);
  };
  const onAbort = () => fail(abortError(signal, `import of ${id}`));
  signal?.addEventListener("abort", onAbort, { once: true });

  const zstd = startChild("zstd", ["-d", "-q", "-c"], ["pipe", "pipe", "pipe"]);
  // --chroot: whatever the stream says, receive cannot write outside destDir; -e: it stops at the
  // stream's end marker (one subvolume); --max-errors 1: at the first error.
  const receive = startChild("btrfs", ["receive", "-e", "--chroot", "-E", "1", destDir], ["pipe", "ignore", "pipe"]);
  const killAll = () => {
    zstd.kill();
    receive.kill();
  };
  inner.signal.addEventListener("abort", killAll, { once: true });

  // Each part is read whole (at most the manifest's part size), checked, then passed on; the next
  // one is fetched meanwhile.
  const total = manifest.compressedBytes;
  const fetchPart = async (index: number, offset: number): Promise<Buffer[]> => {
    const part = manifest.parts[index];
    if (!part) throw new ReplicationError("INVALID_MANIFEST", `no part ${index + 1}`);
    const body = await store.getObject(keys.stream, { signal: inner.signal, range: { offset, length: part.size } });
    // Kept as the chunks that came (no part-size buffer: fresh memory is slow to touch), hashed as they come.
    const chunks: Buffer[] = [];
    const hash = createHash("sha256");
    let n = 0;
    try {
      for await (const chunk of body) {
        const b = chunk as Buffer;
        n += b.length;
        if (n > part.size) {
          throw new ReplicationError("TRUNCATED", `part ${index + 1} of ${id} is longer than ${part.size} bytes`);
        }
        hash.update(b);
        chunks.push(b);
      }
    } finally {
      body.destroy();
    }
    if (n !== part.size) {
      throw new ReplicationError("TRUNCATED", `part ${index + 1} of ${id} has ${n} bytes, not ${part.size}`);
    }
    if (hash.digest("hex") !== part.sha256) {
      throw new ReplicationError("CHECKSUM_MISMATCH", `part ${index + 1} of ${id} does not match its sha256`);
    }
    return chunks;
  };
  async function* checkedParts(): AsyncGenerator<Buffer> {
    let offset = 0;
    let next: Promise<Buffer[]> | undefined;
    try {
      for (let i = 0; i < manifest.parts.length; i++) {
        const current = next ?? fetchPart(i, offset);
        offset += manifest.parts[i]?.size ?? 0;
        next = i + 1 < manifest.parts.length ? fetchPart(i + 1, offset) : undefined;
        // Kept from rejecting unhandled while `current` is awaited; awaited itself next round.
        next?.catch(() => {});
        const chunks = await current;
        onProgress?.({ checkpointId: id, bytes: offset, totalBytes: total });
        yield* chunks;
      }
    } finally {
      if (next) {
        await next.then(
          () => {},
          () => {},
        );
      }
    }
  }

  const check = new StreamCheck(id, manifest.parentCheckpointId !== null);
  const exited = (child: typeof zstd, label: string) =>
    child.exit.then((e) => {
      const why = childFailure(label, e);
      if (why) {
        const code = /cannot find parent subvolume/i.test(e.stderr) ? "PARENT_MISSING" : "RECEIVE_FAILED";
        const err = new ReplicationError(code, why);
        fail(err);
        throw err;
      }
    });
  const tasks = [
    exited(zstd, "zstd -d"),
    exited(receive, "btrfs receive"),
    // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe"
    pipeline(Readable.from(checkedParts()), zstd.proc.stdin!, { signal: inner.signal }).catch((err: unknown) => {
      fail(err);
      throw err;
    }),
    // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe"
    pipeline(zstd.proc.stdout!, check, receive.proc.stdin!, { signal: inner.signal }).catch((err: unknown) => {
      fail(err);
      throw err;
    }),
  ];
  try {
    const results = await Promise.allSettled(tasks);
    if (signal?.aborted) throw abortError(signal, `import of ${id}`);
    if (inner.signal.aborted) throw inner.signal.reason;
    for (const r of results) if (r.status === "rejected") throw r.reason;
    if (manifest.uncompressedBytes !== null && check.bytes !== manifest.uncompressedBytes) {
      throw new ReplicationError(
        "TRUNCATED",
        `the stream of ${id} is ${check.bytes} bytes uncompressed, its manifest says ${manifest.uncompressedBytes}`,
      );
    }
    if (!(await isSubvolume(path))) throw new ReplicationError("RECEIVE_FAILED", `btrfs receive made no ${path}`);
  } finally {
    killAll();
    await Promise.all([zstd.exit, receive.exit]);
    signal?.removeEventListener("abort", onAbort);
  }
}
