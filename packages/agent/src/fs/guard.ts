import { closeSync, constants, fstatSync, openSync, readFileSync, readlinkSync, type Stats, statfsSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import {
  FS_RESERVED_PATH,
  type FsAccess,
  isReservedPath,
  normalizeAbsolute,
  reservedMessage,
} from "@ums/protocol/fs-reserved";
import { FsOpError, fsFailure } from "./errors.js";

// Where the filesystem API's path checks live (one place): the host resolves `workingDir` and refuses
// NUL (server api/fs/routes.ts); everything else is decided here, in the unit, where symlinks resolve.
//
// The rule (@ums/protocol fs-reserved.ts): nothing in /.unit but the read-only logs, checkpoints and
// policy. It is applied twice: to the path asked for (after normalisation), and to what is actually
// reached. Unit root can plant symlinks (`/tmp/x -> /.unit/run`) and swap a directory for one while a
// request runs, so no operation trusts a path twice: each object is opened once (O_PATH, which reads
// nothing and has no side effect), the opened descriptor's real path is read back from
// /proc/self/fd/N and checked, and the operation then goes through that descriptor
// (`/proc/self/fd/N`, or `/proc/self/fd/N/<name>` for a name in a pinned directory), which the kernel
// resolves to the very inode that was checked, whatever has been renamed or replaced meanwhile. This is
// what openat2(RESOLVE_…) would give, with the calls node has. A bind mount of a reserved directory
// elsewhere (units whose root may mount) is caught by the mount the descriptor is on
// (/proc/self/fdinfo/N `mnt_id`, /proc/self/mountinfo): same filesystem, and a root within a reserved
// mount's root.
//
// Unit root could in principle mount something over /proc between the check that it is procfs and the
// use; it would gain nothing it does not have (it is root in the unit): the host never relies on this
// check for its own safety (docs/SECURITY.md: what the unit can reach of the host is read-only binds).

/** O_PATH (Linux, the same on x86-64 and arm64): a descriptor that only pins a path's object. */
export const O_PATH = 0o10000000;
const PROC_SUPER_MAGIC = 0x9fa0;

/** Something is mounted over the unit's /proc: the checks cannot be made, so nothing is done (400). */
const notProc = () =>
  new FsOpError(
    "EPERM",
    "/proc",
    "EPERM: the unit's /proc is not procfs (something is mounted over it); the filesystem API needs it",
  );

/** The refusal of a reserved path (403), in the fs error shape `{error, code, path}`. */
export function reserved(path: string, access: FsAccess): FsOpError {
  return new FsOpError(FS_RESERVED_PATH, path, reservedMessage(path, access));
}

export interface PinOptions {
  /** Follow a symlink in the last component (true: the object it points at). */
  readonly follow: boolean;
  /** Must be a directory (O_DIRECTORY). */
  readonly directory?: boolean;
  /** The syscall named in errors ("open", "lstat", …), as node's own errors would. */
  readonly syscall?: string;
}

function flagsOf(o: PinOptions): number {
  return O_PATH | (o.follow ? 0 : constants.O_NOFOLLOW) | (o.directory ? constants.O_DIRECTORY : 0);
}

/** An object pinned by an O_PATH descriptor, its real path checked. `shown` is the path as the caller named it. */
export class Pinned {
  constructor(
    private readonly handle: FileHandle,
    readonly real: string,
    readonly shown: string,
  ) {}

  get fd(): number {
    return this.handle.fd;
  }

  /** The path that reaches exactly this object (the kernel's magic link, no lookup by name). */
  get proc(): string {
    return `/proc/self/fd/${this.handle.fd}`;
  }

  /** `name` in this (directory) object: one lookup, in this very directory. */
  at(name: string): string {
    return `${this.proc}/${name}`;
  }

  /**
   * fstat: the object itself (for a symlink pinned without following, the link). Made at once: an
   * open descriptor's inode is in memory, and a thread pool round trip costs more than the call.
   */
  stat(): Promise<Stats> {
    try {
      return Promise.resolve(fstatSync(this.handle.fd));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => {});
  }
}

interface Mount {
  readonly id: number;
  readonly dev: string;
  readonly root: string;
  readonly point: string;
}

/** /proc/self/mountinfo (proc(5)): id, parent, major:minor, root, mount point; octal escapes undone. */
export function parseMountInfo(text: string): Mount[] {
  const unoctal = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
  const out: Mount[] = [];
  for (const line of text.split("\n")) {
    const f = line.split(" ");
    if (f.length < 5 || !/^\d+$/.test(f[0] ?? "")) continue;
    out.push({ id: Number(f[0]), dev: f[2] ?? "", root: unoctal(f[3] ?? ""), point: unoctal(f[4] ?? "") });
  }
  return out;
}

const within = (path: string, dir: string): boolean =>
  dir === "/" ? path.startsWith("/") : path === dir || path.startsWith(`${dir}/`);

/**
 * Whether the object at `real` on mount `mountId` is (an alias of) something in a reserved mount: the
 * mounts at and below /.unit but the readable ones. Reached through the reserved mount itself, the path
 * rule has judged it already; through another mount of the same filesystem (a bind), its place in that
 * filesystem decides.
 */
export function onReservedMount(mounts: readonly Mount[], mountId: number, real: string, access: FsAccess): boolean {
  const guarded = mounts.filter((m) => within(m.point, "/.unit") && isReservedPath(m.point, access));
  if (guarded.length === 0) return false;
  const m = mounts.find((x) => x.id === mountId);
  if (!m) return true; // not in our mount table: refuse what cannot be placed
  if (guarded.some((g) => g.id === m.id)) return false;
  const rel = m.point === "/" ? real.slice(1) : real === m.point ? "" : real.slice(m.point.length + 1);
  if (!within(real, m.point)) return guarded.some((g) => g.dev === m.dev);
  const inFs = rel === "" ? m.root : join(m.root, rel);
  return guarded.some((g) => g.dev === m.dev && within(inFs, g.root));
}

const mountIdOf = (fdinfo: string): number => Number(/^mnt_id:\s*(\d+)$/m.exec(fdinfo)?.[1] ?? -1);

// The checks read procfs synchronously: /proc/self/... is made in memory by the kernel and read in
// microseconds, while each asynchronous call is a round trip through libuv's thread pool (~0.3 ms
// on a busy 2-vCPU host), and a check made a dozen of them one after the other (a 1 MiB read spent
// ~9 ms in its checks). What may wait on a disk (opening the path asked for) stays asynchronous.

/** The id of the mount a descriptor is on (/proc/self/fdinfo/N `mnt_id`); -1 when it cannot be read. */
export function fdMountId(fd: number): number {
  try {
    return mountIdOf(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"));
  } catch {
    return -1;
  }
}

/** The real path of a descriptor; a deleted file's " (deleted)" suffix is kept (it never makes a path allowed). */
const procPath = (fd: number) => `/proc/self/fd/${fd}`;

/**
 * One filesystem operation's checks. Create one per operation: it caches the mount table. Every method
 * throws FsOpError: the errno of a failed lookup with the path as the caller named it, or the
 * refusal of a reserved path.
 */
export class Guard {
  private mounts: Mount[] | null = null;
  private procChecked = false;

  private assertProc(): void {
    if (this.procChecked) return;
    assertProcfs();
    this.procChecked = true;
  }

  private mountTable(): Mount[] {
    this.mounts ??= parseMountInfo(readFileSync("/proc/self/mountinfo", "utf8"));
    return this.mounts;
  }

  /** Checks an open descriptor: its real path, and the mount it is on. Returns the real path. */
  async check(fd: number, access: FsAccess, shown: string): Promise<string> {
    return checkFd(fd, access, shown, this.mountTable());
  }

  /** Pins `path` as it is (no check of the path's text), shown as `shown` in errors. */
  async open(path: string, access: FsAccess, o: PinOptions, shown: string): Promise<Pinned> {
    this.assertProc();
    let handle: FileHandle;
    try {
      handle = await open(path, flagsOf(o));
    } catch (err) {
      throw fsFailure(err, shown, o.syscall ?? "open");
    }
    try {
      return new Pinned(handle, await this.check(handle.fd, access, shown), shown);
    } catch (err) {
      await handle.close().catch(() => {});
      throw err instanceof FsOpError ? err : fsFailure(err, shown, o.syscall ?? "open");
    }
  }

  /** Pins `path` (absolute, as asked for) after checking the path itself. */
  pin(path: string, access: FsAccess, o: PinOptions): Promise<Pinned> {
    if (isReservedPath(path, access)) return Promise.reject(reserved(path, access));
    return this.open(path, access, o, path);
  }

  /** Pins `name` in the pinned directory `dir` (no other lookup than that one name). */
  pinIn(dir: Pinned, name: string, access: FsAccess, o: PinOptions, shown = join(dir.shown, name)): Promise<Pinned> {
    if (isReservedPath(join(dir.real, name), access)) return Promise.reject(reserved(shown, access));
    return this.open(dir.at(name), access, o, shown);
  }

  /**
   * For operations on a name (create, delete, rename): pins the directory that holds `path`, checked for
   * `access` (writing, unless a copy reads a symlink), and gives the name. The name's own path is
   * checked too (in the real directory). `/` has no parent: `rootCode` (EBUSY, EISDIR, …) is the error
   * then. Errors name `shown` (default: `path`).
   */
  async parent(
    path: string,
    syscall: string,
    o: { rootCode?: string; access?: FsAccess; shown?: string } = {},
  ): Promise<{ dir: Pinned; name: string }> {
    const access = o.access ?? "write";
    const shown = o.shown ?? path;
    if (isReservedPath(path, access)) throw reserved(shown, access);
    const norm = normalizeAbsolute(path);
    const name = basename(norm);
    if (norm === "/" || name === "") {
      throw fsFailure(Object.assign(new Error(), { code: o.rootCode ?? "EBUSY" }), shown, syscall);
    }
    const dir = await this.open(dirname(norm), access, { follow: true, directory: true, syscall }, shown);
    if (isReservedPath(join(dir.real, name), access)) {
      await dir.close();
      throw reserved(shown, access);
    }
    return { dir, name };
  }

  /**
   * `mkdir -p` of `path` that never leaves a checked directory: each component is opened in the one
   * before it (following symlinks, like mkdir -p), checked, and created there when missing.
   */
  async mkdirs(path: string, mkdir: (p: string) => Promise<unknown>): Promise<void> {
    if (isReservedPath(path, "write")) throw reserved(path, "write");
    let cur = await this.open("/", "read", { follow: true, directory: true }, "/");
    try {
      let shown = "";
      for (const seg of normalizeAbsolute(path).split("/").filter(Boolean)) {
        shown = `${shown}/${seg}`;
        let next: Pinned;
        try {
          next = await this.pinIn(cur, seg, "read", { follow: true, directory: true, syscall: "mkdir" }, shown);
        } catch (err) {
          if (!(err instanceof FsOpError) || err.code !== "ENOENT") throw err;
          await this.check(cur.fd, "write", shown);
          if (isReservedPath(join(cur.real, seg), "write")) throw reserved(shown, "write");
          try {
            await mkdir(cur.at(seg));
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw fsFailure(e, shown, "mkdir");
          }
          next = await this.pinIn(cur, seg, "read", { follow: true, directory: true, syscall: "mkdir" }, shown);
        }
        await cur.close();
        cur = next;
      }
    } finally {
      await cur.close();
    }
  }
}

/** The synchronous pin of a path (file watches are set up synchronously); closes nothing it returns. */
export function pinSync(path: string, access: FsAccess, o: PinOptions): { fd: number; real: string } {
  if (isReservedPath(path, access)) throw reserved(path, access);
  assertProcfs();
  let fd: number;
  try {
    fd = openSync(path, flagsOf(o));
  } catch (err) {
    throw fsFailure(err, path, o.syscall ?? "open");
  }
  try {
    const real = checkFd(fd, access, path, parseMountInfo(readFileSync("/proc/self/mountinfo", "utf8")));
    return { fd, real };
  } catch (err) {
    closeSync(fd);
    throw err instanceof FsOpError ? err : fsFailure(err, path, o.syscall ?? "open");
  }
}

/** Refuses a /proc that is not procfs (something mounted over it): the checks could not be made. */
function assertProcfs(): void {
  let st: { type: number } | null = null;
  // A failure to look (the unit user may not enter `/` after a chmod) shows in the operation's own error.
  try {
    st = statfsSync("/proc/self/fd");
  } catch {}
  if (st && st.type !== PROC_SUPER_MAGIC) throw notProc();
}

/** An open descriptor's checks (Guard.check, pinSync): its real path, and the mount it is on. Returns the real path. */
function checkFd(fd: number, access: FsAccess, shown: string, mounts: Mount[]): string {
  const real = readlinkSync(procPath(fd));
  if (!real.startsWith("/") || isReservedPath(real, access)) throw reserved(shown, access);
  if (mounts.some((m) => within(m.point, "/.unit"))) {
    const id = mountIdOf(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"));
    if (onReservedMount(mounts, id, real, access)) throw reserved(shown, access);
  }
  return real;
}

/** fstat of a descriptor from pinSync. */
export const fstatPinned = (fd: number): Stats => fstatSync(fd);
