import { constants, readFileSync, type Stats } from "node:fs";
import { type FileHandle, open, rename, unlink } from "node:fs/promises";
import type { Readable } from "node:stream";
import { at } from "./common.js";
import { FsOpError, fsFailure } from "./errors.js";
import { fdMountId, type Guard, type Pinned } from "./guard.js";
import { resolveForWrite } from "./open.js";

// PUT /fs/write: a file's new content replaces the old one whole, or not at all.
//
// The body is streamed into a temporary file made in the target's own directory (the pinned, checked
// directory of guard.ts, so a symlink planted meanwhile leads nowhere else), flushed to disk, and renamed
// over the target only once the body has ended complete. A client or server that goes away halfway, a
// full disk or any other failure removes the temporary file: the file that was there (content already
// acknowledged to someone) is untouched. The temporary file is hidden and unique
// (`.<name>.ums-write-<16 hex>`), made with O_EXCL (never an existing object, never through a symlink),
// mode 0600 until it is complete; file watches do not report it (watch.ts).
//
// What a replacement keeps of the file it replaces: its owner and group (fchown of the temporary file)
// and its mode (fchmod), unless `mode` is given: then exactly that mode. A new file gets 0644 less the
// umask (as open(O_CREAT, 0644) made it) or exactly `mode`. Not kept: extended attributes (ACLs, file
// capabilities), which node cannot copy; a write that must keep them has to be made in place (below).
//
// Written in place instead (truncated, then the body streamed in, as before: not atomic), where a
// replacement would change what the file is:
//   - a file with more than one hard link: renaming a new inode over one name would detach that name
//     from the others (they would keep the old content). In place, every name sees the new content, as
//     a write through any of them always did;
//   - a file that is a mount point (a file bound over another, like /etc/hosts in many containers):
//     rename(2) over it fails with EBUSY, after the body has been read;
//   - a file whose owner this identity cannot give the new file (the unit user writing a file of
//     root's it may write to) or in a directory where it cannot make one (EACCES, EPERM, EROFS): the
//     write is allowed, the replacement is not.
// The rest is refused, as before: a directory (EISDIR), a FIFO or any other special file (EINVAL), and
// everything guard.ts refuses (reserved paths; a symlink is followed one checked hop at a time, and it
// is the file it leads to that is replaced, in that file's directory, never the link).

/** The marker of a temporary file of a write in progress. */
export const WRITE_TEMP_MARK = ".ums-write-";
const TEMP_RE = /^\.(?:.*\.)?ums-write-[0-9a-f]{16}$/s;
const NAME_MAX = 255;
const S_ISUID = 0o4000;
const S_ISGID = 0o2000;

/**
 * The temporary name of a write of `name`: `.<name>.ums-write-<random>`, shorter when `name` is long.
 * The random part comes from Web Crypto (node's global `crypto`), loaded at the first write: an
 * import of node:crypto would be loaded at every start of the agent.
 */
export function tempName(
  name: string,
  random: string = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex"),
): string {
  const full = `.${name}${WRITE_TEMP_MARK}${random}`;
  return Buffer.byteLength(full) <= NAME_MAX ? full : `${WRITE_TEMP_MARK}${random}`;
}

/** Whether `name` (a directory entry's name) is a write's temporary file. */
export const isWriteTemp = (name: string): boolean => TEMP_RE.test(name);

/** What a write does with the object it reaches. */
export type WritePlan =
  | { readonly kind: "replace" }
  | { readonly kind: "in-place"; readonly why: "hard links" | "mount point" }
  | { readonly kind: "refuse"; readonly code: "EISDIR" | "EINVAL"; readonly what: string };

/** What the write of `target` (its fstat, null when there is none) does: see the top of this file. */
export function planWrite(
  target: Pick<Stats, "isFile" | "isDirectory" | "isFIFO" | "nlink"> | null,
  sameMountAsDir: boolean,
): WritePlan {
  if (!target) return { kind: "replace" };
  if (target.isDirectory()) return { kind: "refuse", code: "EISDIR", what: "is a directory" };
  // A FIFO with a reader opens even with O_NONBLOCK; writes to it would then fail or stall.
  if (target.isFIFO()) return { kind: "refuse", code: "EINVAL", what: "cannot write a FIFO" };
  if (!target.isFile()) return { kind: "refuse", code: "EINVAL", what: "cannot write a special file" };
  if (target.nlink > 1) return { kind: "in-place", why: "hard links" };
  if (!sameMountAsDir) return { kind: "in-place", why: "mount point" };
  return { kind: "replace" };
}

/**
 * The mode of the written file: `asked` exactly; else the replaced file's, less what writing it in place
 * would have cleared (the kernel drops set-user-ID, and set-group-ID with group execute, when a process
 * without CAP_FSETID writes a file); else 0644 less the umask.
 */
export function finalMode(
  asked: number | null,
  replaced: Pick<Stats, "mode"> | null,
  umask: number,
  privileged: boolean,
): number {
  if (asked !== null) return asked;
  if (!replaced) return 0o644 & ~umask;
  const mode = replaced.mode & 0o7777;
  if (privileged) return mode;
  return mode & ~(S_ISUID | (mode & 0o010 ? S_ISGID : 0)); // 0o010: group execute
}

let umaskCache: number | undefined;
/** This process's umask, read without changing it (process.umask() with no argument is deprecated). */
function umask(): number {
  if (umaskCache === undefined) {
    let text = "";
    try {
      text = readFileSync("/proc/self/status", "utf8");
    } catch {}
    const m = /^Umask:\s*([0-7]+)$/m.exec(text);
    umaskCache = m?.[1] ? Number.parseInt(m[1], 8) : 0o022;
  }
  return umaskCache;
}

/** Codes of a temporary file that cannot be made where the target can still be written in place. */
const NO_TEMP_HERE = new Set(["EACCES", "EPERM", "EROFS"]);
const O_TEMP = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** Bytes of the body gathered while a write is under way; above this the body is paused. */
const GATHER_BYTES = 2 * 1024 * 1024;

/** Bytes written between two flushes started behind a replacement's write (see `FlushBehind`). */
export const FLUSH_BEHIND_BYTES = 64 * 1024 * 1024;

/**
 * The flushes behind a replacement's write: every FLUSH_BEHIND_BYTES written, an fdatasync(2) of the
 * file starts on the thread pool while the body goes on being received and written (one at a time:
 * none starts while one is under way). The fsync before the rename then finds little left to write:
 * the disk works while the network does, instead of after it (1 GiB on this host's btrfs: a final
 * fsync of 0.9-1.8 s alone, 0.05 s after flushes behind). `settle` waits for the one under way and
 * throws its error: a failed flush fails the write like a failed fsync.
 */
export class FlushBehind {
  #since = 0;
  #running: Promise<void> | null = null;
  #error: { error: unknown } | null = null;

  constructor(
    private readonly fh: Pick<FileHandle, "datasync">,
    private readonly every: number = FLUSH_BEHIND_BYTES,
  ) {}

  /** After `bytes` more were written. */
  wrote(bytes: number): void {
    this.#since += bytes;
    if (this.#since < this.every || this.#running || this.#error) return;
    this.#since = 0;
    this.#running = this.fh.datasync().then(
      () => {
        this.#running = null;
      },
      (error: unknown) => {
        this.#running = null;
        this.#error = { error };
      },
    );
  }

  /** Waits for the flush under way, if any; throws the error of any that failed. */
  async settle(): Promise<void> {
    await this.#running;
    if (this.#error) throw this.#error.error;
  }
}

/**
 * Streams `body` into `fh` (at its offset 0 onwards); fails unless the body ended complete. The body
 * keeps being read while a write is under way, and what arrived meanwhile goes into the file with the
 * next write, one writev(2) for all of it: a 1 GiB body is ~1,000 writes on the thread pool, not the
 * 16,000 of its 64 KiB socket reads, and the socket is read while the disk is written. At most
 * GATHER_BYTES wait beside the write under way: above that the body is paused (the client's own
 * pace, through the sockets' backpressure), so memory stays flat. Through the FileHandle: no stream
 * owns or closes the descriptor, and its close waits for a write under way. A failure leaves the body
 * paused and undestroyed: the error can still be answered (the rest is discarded).
 */
async function receive(body: Readable, fh: FileHandle, flush?: FlushBehind): Promise<void> {
  let gathered: Buffer[] = [];
  let bytes = 0;
  let over = null as { error?: unknown } | null;
  let wake: (() => void) | null = null;
  const signal = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const onData = (chunk: Buffer | string) => {
    const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    gathered.push(buf);
    bytes += buf.length;
    if (bytes >= GATHER_BYTES) body.pause();
    signal();
  };
  const onEnd = () => {
    over ??= {};
    signal();
  };
  const onError = (error: unknown) => {
    over ??= { error };
    signal();
  };
  // Gone before its end: a client or server that went away halfway (IncomingMessage: no 'end').
  const onClose = () =>
    onError(Object.assign(new Error("the request body ended before its end"), { code: "ECONNRESET" }));
  body.on("data", onData);
  body.once("end", onEnd);
  body.once("error", onError);
  body.once("close", onClose);
  // Gone before it was listened to: its 'close' came while the temporary file was being made (a
  // client that sent a few bytes and went), and would never come again.
  if (body.destroyed) onClose();
  let at = 0;
  try {
    for (;;) {
      if (over?.error !== undefined) break;
      if (gathered.length === 0) {
        if (over) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        continue;
      }
      const batch = gathered;
      const size = bytes;
      gathered = [];
      bytes = 0;
      if (!over) body.resume(); // the next bytes arrive while these are written
      await writeAll(fh, batch, size, at);
      at += size;
      flush?.wrote(size);
    }
    if (over?.error !== undefined) throw over.error;
  } finally {
    body.off("data", onData);
    body.off("end", onEnd);
    body.off("error", onError);
    body.off("close", onClose);
    body.pause();
    // Before the caller unlinks or closes the file (a flush under way holds its descriptor's use).
    await flush?.settle().catch(() => {});
  }
  if ((body as { complete?: boolean }).complete === false) {
    throw Object.assign(new Error("the request body ended before its end"), { code: "ECONNRESET" });
  }
}

/** Writes `buffers` (`size` bytes in all) at `position`, one writev(2) unless the kernel takes less. */
async function writeAll(fh: FileHandle, buffers: Buffer[], size: number, position: number): Promise<void> {
  let { bytesWritten } = await fh.writev(buffers, position);
  if (bytesWritten === size) return;
  // A short write (rare on a regular file): the rest, from where it stopped.
  const rest = Buffer.concat(buffers, size);
  while (bytesWritten < size) {
    const r = await fh.write(rest, bytesWritten, size - bytesWritten, position + bytesWritten);
    bytesWritten += r.bytesWritten;
  }
}

/** Makes the temporary file of a write of `name` in `dir`, checked like any file opened for writing. */
async function makeTemp(g: Guard, dir: Pinned, name: string, shown: string): Promise<{ fh: FileHandle; name: string }> {
  for (let tries = 0; ; tries++) {
    const tmp = tempName(name);
    let fh: FileHandle;
    try {
      fh = await open(dir.at(tmp), O_TEMP, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST" && tries < 8) continue;
      throw fsFailure(err, shown, "open");
    }
    try {
      await g.check(fh.fd, "write", shown);
    } catch (err) {
      await unlink(dir.at(tmp)).catch(() => {});
      await fh.close().catch(() => {});
      throw err;
    }
    return { fh, name: tmp };
  }
}

/** Flushes a directory's entries (a rename in it) to disk; best effort (the identity may not read it). */
async function syncDir(dir: Pinned): Promise<void> {
  const d = await open(dir.proc, constants.O_RDONLY | constants.O_DIRECTORY).catch(() => null);
  if (!d) return;
  await d.sync().catch(() => {});
  await d.close().catch(() => {});
}

/**
 * The replacement: a temporary file beside the target, renamed over it once complete. Null when it
 * cannot be made here (no temporary file allowed in the directory, or the owner cannot be kept) and
 * the caller is to write in place; nothing of the body has been read then.
 */
async function replace(
  g: Guard,
  dir: Pinned,
  name: string,
  shown: string,
  body: Readable,
  target: Stats | null,
  mode: number | null,
): Promise<Stats | null> {
  let tmp: { fh: FileHandle; name: string };
  try {
    tmp = await makeTemp(g, dir, name, shown);
  } catch (err) {
    if (target && err instanceof FsOpError && NO_TEMP_HERE.has(err.code)) return null;
    throw err;
  }
  let renamed = false;
  try {
    if (target) {
      const own = await at(shown, "fstat", () => tmp.fh.stat());
      if (own.uid !== target.uid || own.gid !== target.gid) {
        try {
          await tmp.fh.chown(target.uid, target.gid);
        } catch (err) {
          // EPERM: not this identity's to give; EINVAL: an owner the unit's user namespace cannot map.
          const code = (err as NodeJS.ErrnoException).code;
          if (code === "EPERM" || code === "EINVAL") return null;
          throw fsFailure(err, shown, "chown");
        }
      }
    }
    const flush = new FlushBehind(tmp.fh);
    await at(shown, "write", () => receive(body, tmp.fh, flush));
    await at(shown, "fsync", () => flush.settle());
    // After the chown (which clears set-ID bits), and only now: 0600 while the content is incomplete.
    await at(shown, "chmod", () => tmp.fh.chmod(finalMode(mode, target, umask(), process.getuid?.() === 0)));
    await at(shown, "fsync", () => tmp.fh.sync());
    const done = await at(shown, "fstat", () => tmp.fh.stat());
    // rename(2) never follows the last component: whatever is at `name` now is replaced, never a file a
    // symlink there would lead to. Both names are looked up in the pinned directory.
    await at(shown, "rename", () => rename(dir.at(tmp.name), dir.at(name)));
    renamed = true;
    await syncDir(dir);
    return done;
  } finally {
    if (!renamed) await unlink(dir.at(tmp.name)).catch(() => {});
    await tmp.fh.close().catch(() => {});
  }
}

/**
 * Writes `body` as the content of `name` in the pinned directory `dir` (`shown`: the path as asked,
 * for errors), replacing the file atomically where that keeps what the file is (top of this file).
 * `mode`: the exact mode of the result; null keeps the replaced file's (a new file: 0644 less the
 * umask). Returns the fstat of the written file. Throws FsOpError.
 */
export async function writeFileFrom(
  g: Guard,
  dir: Pinned,
  name: string,
  shown: string,
  body: Readable,
  mode: number | null,
): Promise<Stats> {
  const t = await resolveForWrite(g, dir, name, shown, null);
  try {
    const target = t.fh ? await at(shown, "fstat", () => (t.fh as FileHandle).stat()) : null;
    const sameMount = t.fh ? fdMountId(t.fh.fd) === fdMountId(t.dir.fd) : true;
    const plan = planWrite(target, sameMount);
    if (plan.kind === "refuse") throw new FsOpError(plan.code, shown, `${plan.code}: ${plan.what}, '${shown}'`);
    if (plan.kind === "replace") {
      const done = await replace(g, t.dir, t.name, shown, body, target, mode);
      if (done) return done;
    }
    // In place (see the top): only an existing file gets here (a new one is always a replacement).
    const fh = t.fh;
    if (!fh) throw new FsOpError("EIO", shown, `EIO: operation failed, write '${shown}'`);
    await at(shown, "write", async () => {
      await fh.truncate(0); // only now that it is checked: open(O_TRUNC) would have cut a file it may not touch
      if (mode !== null) await fh.chmod(mode); // exact, whatever the umask or an earlier mode
      await receive(body, fh);
    });
    return await at(shown, "fstat", () => fh.stat());
  } finally {
    await t.fh?.close().catch(() => {});
    if (t.dir !== dir) await t.dir.close();
  }
}
