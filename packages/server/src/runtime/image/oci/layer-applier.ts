import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  futimesSync,
  lchownSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readdirSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { CommandError, run } from "../../exec/host-command.js";
import { ImageArchiveError, quote, withContext } from "./errors.js";
import { entryComponents, existingDirSync, type Resolved, type ResolvedEntry, resolveFromSync } from "./scoped-path.js";
import { type EntrySink, readTar, type TarHeader } from "./tar-input.js";
import { type PaxXattr, paxXattrs, writeCapability } from "./xattrs.js";

/*
 * The work of applyLayer (apply-layer.ts), done in a worker thread: each entry's filesystem calls
 * are synchronous (a few microseconds each, where a promise per call costs a thread-pool round trip
 * and an event-loop turn), which blocks only this thread.
 */

export interface ApplyStats {
  /** Entries written (files, directories, symlinks, hard links, FIFOs, the root itself). */
  entries: number;
  /** Whiteouts applied (`.wh.NAME` and opaque-directory markers), whether or not they removed anything. */
  whiteouts: number;
  /** What was not applied and why (device nodes, xattrs, ...): at most {@link MAX_SKIPPED_LISTED}. */
  skipped: { path: string; reason: string }[];
  /** How many were skipped in all (`skipped` lists the first ones). */
  skippedTotal: number;
  /** Bytes of regular file data written. */
  bytes: number;
  /** The layer's diff_id (`sha256:<hex>` of its tar data), when it was asked for. */
  diffId?: string;
}

/** The number of skipped entries listed in {@link ApplyStats.skipped}. */
export const MAX_SKIPPED_LISTED = 1000;

export function emptyStats(): ApplyStats {
  return { entries: 0, whiteouts: 0, skipped: [], skippedTotal: 0, bytes: 0 };
}

export interface LayerApplierOptions {
  uidShift: number;
  uidRange: number;
  /** Whether resolved parent directories are remembered (default true; false for tests that compare). */
  cacheParents?: boolean;
}

const WHITEOUT = ".wh.";
const OPAQUE = ".wh..wh..opq";
const { O_CREAT, O_DIRECTORY, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_WRONLY } = constants;

/** The process's umask (read once: ums never changes it), which takes bits from a new file's mode. */
const UMASK = process.umask();

/** A problem of one entry, said of it: "is owned by uid 70000, ..." (the entry's name goes before). */
class EntryProblem extends ImageArchiveError {}

/** `err` as a problem of the entry `name`: "entry 'x' is owned by ...", "entry 'x': ...". */
function entryError(name: string, err: unknown): unknown {
  const q = quote(name);
  if (err instanceof EntryProblem) return new ImageArchiveError(`entry ${q} ${err.message}`);
  if (err instanceof ImageArchiveError && err.message.startsWith(`entry ${q} `)) return err;
  return withContext(err, `entry ${q}`);
}

/** Runs `fn` on `path` opened without following a final symlink. */
function withFd(path: string, flags: number, fn: (fd: number) => void): void {
  const fd = openSync(path, flags | O_NOFOLLOW);
  try {
    fn(fd);
  } finally {
    closeSync(fd);
  }
}

function paxNumber(pax: Record<string, string> | null | undefined, key: string): number | undefined {
  const v = pax?.[key];
  if (v === undefined || !/^\d+(\.\d*)?$/.test(v.trim())) return undefined;
  return Number(v.trim());
}

/** A resolution remembered by {@link ParentCache}: where it got, and the paths it looked at. */
interface Known extends Resolved {
  looked: readonly string[];
}

/**
 * Directories already resolved in this layer: their components as the archive names them
 * ("/"-joined) → where the resolution got ({@link Resolved}), and the paths below the root it looked
 * at ({@link resolveFromSync}'s `visit`: the directories it went through, those it made, the
 * symlinks it followed). Removing or replacing what is at one of them forgets every resolution that
 * looked at it (and at anything below it). Nothing else changes a resolution: an entry only ever
 * creates something where nothing was (a resolution never goes through what is missing: it makes
 * it, or fails), or replaces what was there after removing it ({@link LayerApplier.remove}).
 */
class ParentCache {
  private readonly known = new Map<string, Known>();
  /** A path looked at → the keys of the resolutions that looked at it (some may be gone already). */
  private readonly lookers = new Map<string, Set<string>>();

  get(key: string): Known | undefined {
    return this.known.get(key);
  }

  set(key: string, known: Known): void {
    this.known.set(key, known);
    for (const rel of known.looked) {
      let keys = this.lookers.get(rel);
      if (keys === undefined) {
        keys = new Set();
        this.lookers.set(rel, keys);
      }
      keys.add(key);
    }
  }

  /** What is at `rel` (and, for a directory, below it) is removed: forget what went through it. */
  invalidate(rel: string, directory: boolean): void {
    this.forget(rel);
    if (!directory || this.known.size === 0) return;
    // Whatever looked below `rel` looked at `rel` too (a resolution reaches a path through its
    // parent), so it is gone already; checked all the same: removing a directory is rare.
    const below = `${rel}/`;
    for (const looked of this.lookers.keys()) if (looked.startsWith(below)) this.forget(looked); // deleting while iterating a Map is fine
  }

  private forget(rel: string): void {
    const keys = this.lookers.get(rel);
    if (keys === undefined) return;
    this.lookers.delete(rel);
    for (const key of keys) this.known.delete(key);
  }
}

/** The data of a regular file entry, written to `fd`; its owner, mode, capability and mtime at the end. */
class FileSink implements EntrySink {
  private open = true;

  constructor(
    private readonly applier: LayerApplier,
    private readonly header: TarHeader,
    private readonly at: ResolvedEntry,
    private readonly fd: number,
    private readonly uid: number,
    private readonly gid: number,
    /** Whether the file was created with its mode already (no setuid, setgid or sticky bit, none the umask takes). */
    private readonly modeSet: boolean,
  ) {}

  dataRange(buf: Buffer, start: number, end: number): void {
    this.applier.stats.bytes += end - start;
    try {
      for (let off = start; off < end; ) off += writeSync(this.fd, buf, off, end - off);
    } catch (err) {
      throw entryError(this.header.name, err);
    }
  }

  end(): void | Promise<void> {
    let x: Promise<void> | undefined;
    try {
      fchownSync(this.fd, this.uid, this.gid);
      // After chown, which clears setuid/setgid; a mode of plain permission bits was set at creation.
      if (!this.modeSet) fchmodSync(this.fd, (this.header.mode ?? 0o644) & 0o7777);
      x = this.applier.xattrs(this.header, this.at.path, true); // a capability too: chown clears it
      if (x === undefined) return this.finish();
    } catch (err) {
      this.abort();
      throw entryError(this.header.name, err);
    }
    return x
      .then(() => this.finish())
      .catch((err: unknown) => {
        this.abort();
        throw entryError(this.header.name, err);
      });
  }

  private finish(): void {
    try {
      const mtime = this.applier.mtime(this.header);
      futimesSync(this.fd, mtime, mtime);
    } finally {
      this.close();
    }
    this.applier.written(this.at.rel);
  }

  private close(): void {
    if (!this.open) return;
    this.open = false;
    closeSync(this.fd);
  }

  abort(): void {
    try {
      this.close();
    } catch {}
  }
}

/**
 * Applies the entries of one layer onto `root` (see applyLayer): {@link LayerApplier.entry} for each
 * entry in turn, then {@link LayerApplier.finish}. Synchronous but for what runs a host command
 * (FIFOs, file capabilities).
 */
export class LayerApplier {
  readonly stats = emptyStats();
  /** Real paths (below the root, "/"-joined, "" = the root) this layer wrote, and their ancestors. */
  private readonly touched = new Set<string>();
  private readonly parents: ParentCache | undefined;
  /** Directory mtimes, set at the end: entries written into a directory change its mtime. */
  private readonly dirTimes = new Map<string, Date>();
  /** The root's path with a "/" after it: `${rootSlash}${rel}` is join(root, rel) for a real path `rel`. */
  private readonly rootSlash: string;

  constructor(
    private readonly root: string,
    private readonly opts: LayerApplierOptions,
  ) {
    this.parents = opts.cacheParents === false ? undefined : new ParentCache();
    this.rootSlash = join(root, "x").slice(0, -1);
  }

  /** Applies the entry of `header`; the sink its data goes to, if it takes data. */
  entry(header: TarHeader): EntrySink | undefined | Promise<EntrySink | undefined> {
    try {
      const r = this.apply(header);
      return r instanceof Promise
        ? r.catch((err: unknown) => {
            throw entryError(header.name, err);
          })
        : r;
    } catch (err) {
      throw entryError(header.name, err);
    }
  }

  /** Sets the mtimes of the directories written, where they still are directories. */
  finish(): void {
    const known = new Map<string, boolean>();
    for (const [rel, mtime] of this.dirTimes) {
      const path = existingDirSync(this.root, rel, known);
      // Every component is a real directory (lstat'ed just now): lutimes does not follow the last.
      if (path !== undefined) lutimesSync(path, mtime, mtime);
    }
  }

  private apply(header: TarHeader): EntrySink | undefined | Promise<undefined> {
    const components = entryComponents(header.name);
    const last = components[components.length - 1];
    if (last?.startsWith(WHITEOUT)) {
      this.whiteout(components, last);
      return;
    }
    const type = header.type === undefined ? "file" : header.type; // null: a type the parser does not know
    if (type === "character-device" || type === "block-device") {
      this.skip(header.name, `${type} not created (units get /dev from the runtime)`);
      return;
    }
    if (components.length === 0) return this.applyRoot(header, type);

    switch (type) {
      case "file":
      case "contiguous-file":
        return this.file(header, components);
      case "directory":
        return this.directory(header, components);
      case "symlink":
        return this.symlink(header, components);
      case "link":
        this.hardlink(header, components);
        return;
      case "fifo":
        return this.fifo(header, components);
      default:
        this.skip(header.name, `unsupported tar entry type${type ? ` ${type}` : ""}`);
    }
  }

  private skip(path: string, reason: string): void {
    this.stats.skippedTotal++;
    if (this.stats.skipped.length < MAX_SKIPPED_LISTED) this.stats.skipped.push({ path, reason });
  }

  /** The host id of the entry's `what` (uid or gid), shifted; an EntryProblem if it is out of range. */
  private id(header: TarHeader, what: "uid" | "gid"): number {
    const { uidShift, uidRange } = this.opts;
    const id = (header.pax ? paxNumber(header.pax, what) : undefined) ?? header[what] ?? 0;
    if (!Number.isSafeInteger(id) || id < 0 || id >= uidRange) {
      throw new EntryProblem(`is owned by ${what} ${id}, outside the ${uidRange} ids a unit maps (0-${uidRange - 1})`);
    }
    return id + uidShift;
  }

  private owner(header: TarHeader): { uid: number; gid: number } {
    const uid = this.id(header, "uid");
    return { uid, gid: this.id(header, "gid") };
  }

  mtime(header: TarHeader): Date {
    const pax = paxNumber(header.pax, "mtime");
    const d = pax !== undefined ? new Date(pax * 1000) : header.mtime;
    return d instanceof Date && !Number.isNaN(d.getTime()) ? d : new Date(0);
  }

  private mode(header: TarHeader, fallback: number): number {
    return (header.mode ?? fallback) & 0o7777;
  }

  /** An entry was written at `rel`. */
  written(rel: string): void {
    this.markTouched(rel);
    this.stats.entries++;
  }

  private markTouched(rel: string): void {
    let p = rel;
    while (!this.touched.has(p)) {
      this.touched.add(p);
      if (p === "") return;
      const i = p.lastIndexOf("/");
      p = i < 0 ? "" : p.slice(0, i);
    }
  }

  /** A directory a path needs that the layer does not have (yet): root-owned, 0755. */
  private readonly mkdirImplicit = (path: string, components: readonly string[]): void => {
    mkdirSync(path, 0o700);
    const id = this.opts.uidShift;
    withFd(path, O_RDONLY | O_DIRECTORY, (fd) => {
      fchownSync(fd, id, id);
      fchmodSync(fd, 0o755);
    });
    this.markTouched(components.join("/"));
  };

  /**
   * The directory `components` names, resolved inside the root (made where missing with `make`);
   * undefined when it is missing (and not `make`). Remembered while what it went through stays; a
   * directory is resolved from the longest of its ancestors that is remembered.
   */
  private dir(components: readonly string[], make: boolean): string[] | undefined {
    const cache = this.parents;
    const opts = make ? { mkdir: this.mkdirImplicit } : {};
    if (cache === undefined) return resolveFromSync(this.root, { dir: [], links: 0 }, components, opts)?.dir;
    const key = components.join("/");
    const known = cache.get(key);
    if (known !== undefined) return known.dir;
    let from: Known = { dir: [], links: 0, looked: [] }; // the root
    let rest = components;
    for (let k = key.lastIndexOf("/"), n = components.length - 1; k > 0; k = key.lastIndexOf("/", k - 1), n--) {
      const prefix = cache.get(key.slice(0, k)); // the first n components
      if (prefix !== undefined) {
        from = prefix;
        rest = components.slice(n);
        break;
      }
    }
    const looked = from.looked.slice();
    const got = resolveFromSync(this.root, from, rest, {
      ...opts,
      visit: (rel) => looked.push(rel),
    });
    if (got === undefined) return undefined;
    cache.set(key, { ...got, looked });
    return got.dir;
  }

  /** Where `components` goes: the parent resolved (made where missing) inside the root. */
  private place(components: readonly string[]): ResolvedEntry & { parentKey: string } {
    const parentComponents = components.slice(0, -1);
    const parent = this.dir(parentComponents, true) as string[];
    const name = components[components.length - 1] as string;
    const rel = parent.length === 0 ? name : `${parent.join("/")}/${name}`;
    return { parent, name, path: this.rootSlash + rel, rel, parentKey: parentComponents.join("/") };
  }

  /**
   * A new regular file at `at`, opened for writing: whatever was there is removed first. O_EXCL
   * (with O_CREAT it never follows a symlink) and O_NOFOLLOW: the file is this one, nothing else.
   */
  private create(at: ResolvedEntry, mode: number): number {
    const flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
    try {
      return openSync(at.path, flags, mode);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    this.remove(at.rel);
    return openSync(at.path, flags, mode);
  }

  /**
   * Removes what is at `rel` (real, below the root; a directory with all in it; a symlink itself);
   * whether there was anything.
   */
  private remove(rel: string): boolean {
    const path = this.rootSlash + rel;
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (st === undefined) return false;
    // A resolved parent may have gone through what is removed.
    this.parents?.invalidate(rel, st.isDirectory());
    if (st.isDirectory()) rmSync(path, { recursive: true, force: true });
    else unlinkSync(path);
    return true;
  }

  private whiteout(components: string[], last: string): void {
    const parent = this.dir(components.slice(0, -1), false);
    if (last === OPAQUE) {
      this.stats.whiteouts++;
      if (parent === undefined) return;
      const rel = parent.join("/");
      this.markTouched(rel);
      this.prune(rel);
      return;
    }
    if (last.startsWith(`${WHITEOUT}${WHITEOUT}`)) {
      this.skip(components.join("/"), "aufs metadata entry ignored");
      return;
    }
    const name = last.slice(WHITEOUT.length);
    if (name === "" || name === "." || name === "..") {
      throw new EntryProblem(`is a whiteout of ${quote(name)}, which is not a name`);
    }
    this.stats.whiteouts++;
    if (parent !== undefined) this.remove(parent.length === 0 ? name : `${parent.join("/")}/${name}`);
  }

  /** Removes from the directory `rel` (recursively) all this layer did not write. */
  private prune(rel: string): void {
    const dir = rel === "" ? this.root : join(this.root, rel);
    for (const name of readdirSync(dir)) {
      const childRel = rel === "" ? name : `${rel}/${name}`;
      if (!this.touched.has(childRel)) this.remove(childRel);
      else if (lstatSync(join(dir, name)).isDirectory()) this.prune(childRel);
    }
  }

  /**
   * Writes or skips the xattrs of the entry, in order; a promise when a file capability is written
   * (by a host command), else undefined.
   */
  xattrs(header: TarHeader, path: string, regularFile: boolean): Promise<void> | undefined {
    const list = paxXattrs(header.pax);
    for (const [i, x] of list.entries()) {
      if (regularFile && x.name === "security.capability" && x.value !== undefined) {
        return this.xattrsFrom(header.name, path, list.slice(i));
      }
      this.skipXattr(header.name, x.name, regularFile);
    }
    return undefined;
  }

  private async xattrsFrom(name: string, path: string, list: PaxXattr[]): Promise<void> {
    for (const x of list) {
      if (x.name === "security.capability" && x.value !== undefined) {
        const problem = await writeCapability(path, x.value, this.opts.uidShift);
        if (problem !== undefined) this.skip(name, problem);
      } else this.skipXattr(name, x.name, true);
    }
  }

  private skipXattr(name: string, xattr: string, regularFile: boolean): void {
    if (xattr !== "security.capability" || !regularFile) this.skip(name, `xattr ${xattr} not kept`);
    else this.skip(name, "security.capability not kept: its value could not be decoded");
  }

  private applyRoot(header: TarHeader, type: string | null): undefined | Promise<undefined> {
    if (type !== "directory")
      throw new EntryProblem(`is a ${type ?? "special entry"}: the image's root must be a directory`);
    const { uid, gid } = this.owner(header);
    withFd(this.root, O_RDONLY | O_DIRECTORY, (fd) => {
      fchownSync(fd, uid, gid);
      fchmodSync(fd, this.mode(header, 0o755));
    });
    const done = () => {
      this.dirTimes.set("", this.mtime(header));
      this.markTouched("");
      this.stats.entries++;
      return undefined;
    };
    const x = this.xattrs(header, this.root, false);
    return x ? x.then(done) : done();
  }

  private file(header: TarHeader, components: string[]): EntrySink {
    const { uid, gid } = this.owner(header);
    const at = this.place(components);
    // Created with its mode when the mode has only permission bits the umask leaves (most files):
    // one fchmod less per file. Else 0600, and the mode set after the owner.
    const mode = this.mode(header, 0o644);
    const modeSet = (mode & ~0o777) === 0 && (mode & UMASK) === 0;
    return new FileSink(this, header, at, this.create(at, modeSet ? mode : 0o600), uid, gid, modeSet);
  }

  private directory(header: TarHeader, components: string[]): undefined | Promise<undefined> {
    const { uid, gid } = this.owner(header);
    const at = this.place(components);
    if (!this.tryMkdir(at.path)) {
      // Something is there (mkdir follows no symlink): a directory stays, anything else is replaced.
      if (!lstatSync(at.path).isDirectory()) {
        this.remove(at.rel);
        mkdirSync(at.path, 0o700);
      }
    }
    withFd(at.path, O_RDONLY | O_DIRECTORY, (fd) => {
      fchownSync(fd, uid, gid);
      fchmodSync(fd, this.mode(header, 0o755));
    });
    // Entries in it are placed without looking again: it is a real directory, right after its parent.
    const parent = this.parents?.get(at.parentKey);
    if (parent !== undefined) {
      this.parents?.set(components.join("/"), {
        dir: [...at.parent, at.name],
        links: parent.links,
        looked: [...parent.looked, at.rel],
      });
    }
    const done = () => {
      this.dirTimes.set(at.rel, this.mtime(header));
      this.written(at.rel);
      return undefined;
    };
    const x = this.xattrs(header, at.path, false);
    return x ? x.then(done) : done();
  }

  /** Makes the directory `path`; false when something is there already. */
  private tryMkdir(path: string): boolean {
    try {
      mkdirSync(path, 0o700);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw err;
    }
  }

  private symlink(header: TarHeader, components: string[]): undefined | Promise<undefined> {
    const { uid, gid } = this.owner(header);
    const target = header.linkname ?? "";
    if (target === "") throw new EntryProblem("is a symlink with an empty target");
    if (target.includes("\0")) throw new EntryProblem("is a symlink whose target has a NUL byte");
    const at = this.place(components);
    try {
      symlinkSync(target, at.path); // the target is only data: never resolved here
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      this.remove(at.rel);
      symlinkSync(target, at.path);
    }
    lchownSync(at.path, uid, gid);
    const done = () => {
      const mtime = this.mtime(header);
      lutimesSync(at.path, mtime, mtime);
      this.written(at.rel);
      return undefined;
    };
    const x = this.xattrs(header, at.path, false);
    return x ? x.then(done) : done();
  }

  private hardlink(header: TarHeader, components: string[]): void {
    const linkname = header.linkname ?? "";
    let targetComponents: string[];
    try {
      targetComponents = entryComponents(linkname);
    } catch {
      throw new EntryProblem(`is a hard link to ${quote(linkname)}, which leaves the image`);
    }
    const missing = () => new EntryProblem(`is a hard link to ${quote(linkname)}, which is not in the image`);
    const targetName = targetComponents[targetComponents.length - 1];
    if (targetName === undefined) throw new EntryProblem("is a hard link to the image's root directory");
    const targetParent = this.dir(targetComponents.slice(0, -1), false);
    if (targetParent === undefined) throw missing();
    const targetPath =
      this.rootSlash + (targetParent.length === 0 ? targetName : `${targetParent.join("/")}/${targetName}`);
    const st = lstatSync(targetPath, { throwIfNoEntry: false });
    if (st === undefined) throw missing();
    if (st.isDirectory()) throw new EntryProblem(`is a hard link to ${quote(linkname)}, which is a directory`);
    const at = this.place(components);
    if (at.path === targetPath) return; // a link to itself: nothing to do
    const makeLink = () => {
      try {
        linkSync(targetPath, at.path); // link(2) does not follow a symlink target: it links the symlink
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") throw missing(); // removed with what it replaced
        throw err;
      }
    };
    try {
      makeLink();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      this.remove(at.rel);
      makeLink();
    }
    this.written(at.rel);
  }

  private async fifo(header: TarHeader, components: string[]): Promise<undefined> {
    const { uid, gid } = this.owner(header);
    const at = this.place(components);
    this.remove(at.rel);
    try {
      await run("mkfifo", ["-m", "600", "--", at.path]);
    } catch (err) {
      if (err instanceof CommandError) {
        this.skip(header.name, `FIFO not created: ${err.message}`);
        return;
      }
      throw err;
    }
    withFd(at.path, O_RDONLY | O_NONBLOCK, (fd) => {
      fchownSync(fd, uid, gid);
      fchmodSync(fd, this.mode(header, 0o644));
      const mtime = this.mtime(header);
      futimesSync(fd, mtime, mtime);
    });
    await this.xattrs(header, at.path, false);
    this.markTouched(at.rel);
    this.stats.entries++;
  }
}

export interface ApplyInThreadOptions extends LayerApplierOptions {
  /** The layer's diff_id, checked at the end. */
  expectDiffId?: string;
  /** Whether the diff_id is computed and given in the stats (it is when `expectDiffId` is set). */
  hash?: boolean;
  /** Throws to stop (between entries). */
  checkAbort?: () => void;
}

/** Applies the layer `input` onto `root` in this thread (the worker's side of applyLayer). */
export async function applyLayerHere(
  root: string,
  input: AsyncIterable<Buffer>,
  opts: ApplyInThreadOptions,
): Promise<ApplyStats> {
  const applier = new LayerApplier(root, opts);
  const { diffId } = await readTar(input, {
    what: "the layer",
    ...(opts.checkAbort && { checkAbort: opts.checkAbort }),
    hash: opts.expectDiffId !== undefined || opts.hash === true, // else nothing needs the digest
    onEntry: (header) => applier.entry(header),
  });
  applier.finish();
  if (opts.expectDiffId !== undefined && opts.expectDiffId !== diffId) {
    throw new ImageArchiveError(
      `the layer's content (${diffId}) does not match its diff_id in the image config (${opts.expectDiffId}): the archive is corrupt`,
    );
  }
  return opts.hash ? { ...applier.stats, ...(diffId !== undefined && { diffId }) } : applier.stats;
}
