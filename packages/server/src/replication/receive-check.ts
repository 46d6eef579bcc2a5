import { lstat } from "node:fs/promises";
import { Transform, type TransformCallback } from "node:stream";
import { failpoint } from "../failpoints/failpoints.js";
import { deleteSubvolume, isSubvolume } from "../runtime/storage/btrfs.js";
import { ReplicationError } from "./errors.js";

// What a receive of a send stream checks and cleans up, from the store (import.ts) or straight from
// another node (direct.ts).

const STREAM_MAGIC = Buffer.from("btrfs-stream\0", "latin1");
const CMD_SUBVOL = 1;
const CMD_SNAPSHOT = 2;
const ATTR_PATH = 15;
/** The first command (subvol or snapshot) is small: its path, uuid, ctransid and perhaps a clone source. */
const MAX_FIRST_COMMAND = 64 * 1024;
/** Where the `receive.midway` failpoint strikes: well past the first command. */
const MIDWAY_BYTES = 1 << 20;

/**
 * Passes a decompressed send stream on, counting its bytes, after checking its first command: the
 * subvolume it creates must be `name` (so receive can only make `<destDir>/<name>`), a full stream
 * for a checkpoint without parent and a snapshot of its parent otherwise.
 */
export class StreamCheck extends Transform {
  bytes = 0;
  private head: Buffer[] | undefined = [];
  private headBytes = 0;

  constructor(
    private readonly name: string,
    private readonly incremental: boolean,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (!this.head) {
      // Crash tests: a kill -9 once `btrfs receive` has made the subvolume and written into it.
      if (this.bytes > MIDWAY_BYTES) failpoint("receive.midway");
      cb(null, chunk);
      return;
    }
    this.head.push(chunk);
    this.headBytes += chunk.length;
    const all = Buffer.concat(this.head, this.headBytes);
    let verdict: "wait" | "ok";
    try {
      verdict = this.inspect(all);
    } catch (err) {
      cb(err as Error);
      return;
    }
    if (verdict === "wait") {
      cb();
      return;
    }
    this.head = undefined;
    cb(null, all);
  }

  override _flush(cb: TransformCallback): void {
    cb(this.head ? new ReplicationError("RECEIVE_FAILED", "the send stream ends before its first command") : null);
  }

  private inspect(b: Buffer): "wait" | "ok" {
    const bad = (why: string) => new ReplicationError("RECEIVE_FAILED", `not the expected send stream: ${why}`);
    const hdr = STREAM_MAGIC.length + 4;
    if (b.length < hdr + 10) return "wait";
    if (!b.subarray(0, STREAM_MAGIC.length).equals(STREAM_MAGIC)) throw bad("no btrfs-stream header");
    const version = b.readUInt32LE(STREAM_MAGIC.length);
    if (version < 1 || version > 3) throw bad(`version ${version}`);
    const len = b.readUInt32LE(hdr);
    const cmd = b.readUInt16LE(hdr + 4);
    if (len > MAX_FIRST_COMMAND) throw bad("first command too long");
    if (b.length < hdr + 10 + len) return "wait";
    if (cmd !== (this.incremental ? CMD_SNAPSHOT : CMD_SUBVOL)) throw bad(`first command ${cmd}`);
    let path: string | undefined;
    for (let o = hdr + 10; o + 4 <= hdr + 10 + len; ) {
      const type = b.readUInt16LE(o);
      const tlen = b.readUInt16LE(o + 2);
      if (o + 4 + tlen > hdr + 10 + len) throw bad("attribute runs past its command");
      if (type === ATTR_PATH) path = b.toString("utf8", o + 4, o + 4 + tlen);
      o += 4 + tlen;
    }
    if (path !== this.name) throw bad(`it makes subvolume ${JSON.stringify(path)}, not ${this.name}`);
    return "ok";
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

/**
 * Marks a checkpoint as being received on this host (the runtime's `receiving`): the returned
 * function says its snapshot is whole. Until then a crash leaves a partial snapshot that the host
 * knows for one (never taken for the checkpoint) and removes at its next start.
 */
export type MarkReceiving = (checkpointId: string) => Promise<() => Promise<void>>;

/**
 * The end of one receive into `path`: its mark goes once it is whole; a failed one's partial
 * subvolume is deleted (and then its mark: if the delete fails, the mark stays for the next start).
 */
export async function settleReceive(
  path: string,
  ok: boolean,
  received: (() => Promise<void>) | undefined,
): Promise<void> {
  if (ok) {
    await received?.();
    return;
  }
  await removePartial(path);
  // The receive's own error is the one thrown: a mark that cannot go stays for the next start.
  if (!(await exists(path))) {
    await received?.().catch((err: unknown) =>
      process.emitWarning(
        `could not remove the receiving mark of ${path}: ${(err as Error).message}`,
        "ReplicationWarning",
      ),
    );
  }
}

/** Deletes a failed receive's subvolume; if that fails too, says so (the receive's error is thrown all the same). */
export async function removePartial(path: string): Promise<void> {
  try {
    if (await isSubvolume(path)) await deleteSubvolume(path);
  } catch (err) {
    process.emitWarning(
      `could not delete the partial subvolume ${path}: ${(err as Error).message}`,
      "ReplicationWarning",
    );
  }
}
