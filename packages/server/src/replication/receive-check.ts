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

/** A send stream's header: its magic and a 4-byte version. */
const STREAM_HEADER = STREAM_MAGIC.length + 4;
/** A command's header: its length (4 bytes), command (2) and CRC (4), then `length` bytes of attributes. */
const COMMAND_HEADER = 10;
const CMD_END = 21;

/**
 * The checks of a send stream, over its chunks as they pass: its first command must make subvolume
 * `name` (so receive can only make `<destDir>/<name>`), a full stream for a checkpoint without parent
 * and a snapshot of its parent otherwise; with `requireEnd`, it must end with its end command and
 * nothing after it (a connection whose end is the stream's end, not a framing: issue #15's moves).
 */
export class StreamChecker {
  bytes = 0;
  private head: Buffer[] | undefined = [];
  private headBytes = 0;
  /** Bytes of the current command (or the stream's header) still to pass before the next command's header. */
  private skip = STREAM_HEADER;
  private readonly header = Buffer.alloc(COMMAND_HEADER);
  private headerFill = 0;
  private lastCommand = -1;

  constructor(
    private readonly name: string,
    private readonly incremental: boolean,
    private readonly requireEnd = false,
  ) {}

  /** Whether the first command is not whole yet (nothing of the stream has been checked). */
  get waiting(): boolean {
    return this.head !== undefined;
  }

  /** Takes the next chunk; throws when the stream is not the expected one. */
  look(chunk: Buffer): void {
    // Crash tests: a kill -9 once `btrfs receive` has made the subvolume and written into it.
    if (!this.head && this.bytes + chunk.length > MIDWAY_BYTES) failpoint("receive.midway");
    this.bytes += chunk.length;
    if (this.head) {
      this.head.push(chunk);
      this.headBytes += chunk.length;
      if (this.inspect(Buffer.concat(this.head, this.headBytes)) === "ok") this.head = undefined;
    }
    if (this.requireEnd) this.track(chunk);
  }

  /** The stream ended: throws when it was cut short. */
  end(): void {
    if (this.head) throw new ReplicationError("RECEIVE_FAILED", "the send stream ends before its first command");
    if (this.requireEnd && !(this.skip === 0 && this.headerFill === 0 && this.lastCommand === CMD_END)) {
      throw new ReplicationError("RECEIVE_FAILED", "the send stream was cut short (it ends before its end command)");
    }
  }

  /** Follows the commands' lengths to the end command. */
  private track(chunk: Buffer): void {
    for (let i = 0; i < chunk.length; ) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - i);
        this.skip -= n;
        i += n;
        continue;
      }
      if (this.lastCommand === CMD_END) {
        throw new ReplicationError("RECEIVE_FAILED", "not the expected send stream: bytes past its end command");
      }
      const n = Math.min(COMMAND_HEADER - this.headerFill, chunk.length - i);
      chunk.copy(this.header, this.headerFill, i, i + n);
      this.headerFill += n;
      i += n;
      if (this.headerFill === COMMAND_HEADER) {
        this.headerFill = 0;
        this.skip = this.header.readUInt32LE(0);
        this.lastCommand = this.header.readUInt16LE(4);
      }
    }
  }

  private inspect(b: Buffer): "wait" | "ok" {
    const bad = (why: string) => new ReplicationError("RECEIVE_FAILED", `not the expected send stream: ${why}`);
    const hdr = STREAM_HEADER;
    if (b.length < hdr + COMMAND_HEADER) return "wait";
    if (!b.subarray(0, STREAM_MAGIC.length).equals(STREAM_MAGIC)) throw bad("no btrfs-stream header");
    const version = b.readUInt32LE(STREAM_MAGIC.length);
    if (version < 1 || version > 3) throw bad(`version ${version}`);
    const len = b.readUInt32LE(hdr);
    const cmd = b.readUInt16LE(hdr + 4);
    if (len > MAX_FIRST_COMMAND) throw bad("first command too long");
    if (b.length < hdr + COMMAND_HEADER + len) return "wait";
    if (cmd !== (this.incremental ? CMD_SNAPSHOT : CMD_SUBVOL)) throw bad(`first command ${cmd}`);
    let path: string | undefined;
    for (let o = hdr + COMMAND_HEADER; o + 4 <= hdr + COMMAND_HEADER + len; ) {
      const type = b.readUInt16LE(o);
      const tlen = b.readUInt16LE(o + 2);
      if (o + 4 + tlen > hdr + COMMAND_HEADER + len) throw bad("attribute runs past its command");
      if (type === ATTR_PATH) path = b.toString("utf8", o + 4, o + 4 + tlen);
      o += 4 + tlen;
    }
    if (path !== this.name) throw bad(`it makes subvolume ${JSON.stringify(path)}, not ${this.name}`);
    return "ok";
  }
}

/**
 * Passes a decompressed send stream on, counting its bytes, after checking its first command
 * (StreamChecker): nothing goes on before that command is whole and right.
 */
export class StreamCheck extends Transform {
  private readonly checker: StreamChecker;
  private held: Buffer[] = [];

  constructor(name: string, incremental: boolean) {
    super();
    this.checker = new StreamChecker(name, incremental);
  }

  get bytes(): number {
    return this.checker.bytes;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (!this.checker.waiting) {
      this.checker.look(chunk);
      cb(null, chunk);
      return;
    }
    try {
      this.checker.look(chunk);
    } catch (err) {
      cb(err as Error);
      return;
    }
    this.held.push(chunk);
    if (this.checker.waiting) {
      cb();
      return;
    }
    const all = Buffer.concat(this.held);
    this.held = [];
    cb(null, all);
  }

  override _flush(cb: TransformCallback): void {
    try {
      this.checker.end();
      cb();
    } catch (err) {
      cb(err as Error);
    }
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
