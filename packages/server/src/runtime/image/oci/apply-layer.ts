import { constants } from "node:fs";
import {
  type FileHandle,
  lchown,
  link,
  lstat,
  lutimes,
  mkdir,
  open,
  readdir,
  rm,
  symlink,
  unlink,
} from "node:fs/promises";
import { join } from "node:path";
import { CommandError, run } from "../../exec/host-command.js";
import { ImageArchiveError, quote, withContext } from "./errors.js";
import { entryComponents, existingDir, type ResolvedEntry, resolveDir, resolveEntry } from "./scoped-path.js";
import { destroyInput, readTar, type TarEntry, type TarHeader } from "./tar-input.js";
import { paxXattrs, writeCapability } from "./xattrs.js";

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
}

export interface ApplyLayerOptions {
  /** Host id of the image's id 0: an entry of uid/gid N is stored as uidShift + N. */
  uidShift: number;
  /** Ids an image may use: 0..uidRange-1; an entry owned by another is an error. */
  uidRange: number;
  /** The layer's diff_id (`sha256:<hex>` of its tar data, from the image config), checked at the end. */
  expectDiffId?: string;
  signal?: AbortSignal;
}

/** The number of skipped entries listed in {@link ApplyStats.skipped}. */
export const MAX_SKIPPED_LISTED = 1000;

export function emptyStats(): ApplyStats {
  return { entries: 0, whiteouts: 0, skipped: [], skippedTotal: 0, bytes: 0 };
}

/** Adds `b` into `a`. */
export function addStats(a: ApplyStats, b: ApplyStats): void {
  a.entries += b.entries;
  a.whiteouts += b.whiteouts;
  a.bytes += b.bytes;
  a.skippedTotal += b.skippedTotal;
  for (const s of b.skipped) if (a.skipped.length < MAX_SKIPPED_LISTED) a.skipped.push(s);
}

const WHITEOUT = ".wh.";
/** File data is written in writes of about this size. */
const WRITE_BATCH = 1024 * 1024;
const OPAQUE = ".wh..wh..opq";
const { O_CREAT, O_DIRECTORY, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_WRONLY } = constants;

/**
 * Applies one layer (a tar stream; plain or gzip) onto `root`, as overlayfs would show it over what
 * is there: entries replace what is at their path (an existing directory is kept and takes the new
 * mode/owner), `dir/.wh.NAME` removes `dir/NAME`, `dir/.wh..wh..opq` removes what lower layers put
 * in `dir` (what this layer puts there stays, before or after the marker). Owners are shifted by
 * `uidShift`; modes (setuid, setgid, sticky too), mtimes, symlinks, hard links and FIFOs are kept;
 * file capabilities are written as namespaced (v3) ones when the host has python3. Device nodes and
 * other xattrs are skipped and listed.
 *
 * Every path is resolved inside `root` as if it were `/` (symlinks of the image are followed within
 * it, never out of it; an entry's own name is never followed): nothing outside `root` is created,
 * changed or removed, whatever the archive holds. A name with "..", an id outside the range, a
 * hard link to something not in the image, corrupt data: {@link ImageArchiveError}. Nothing else may
 * write into `root` meanwhile.
 */
export async function applyLayer(
  root: string,
  layer: NodeJS.ReadableStream | AsyncIterable<Buffer>,
  opts: ApplyLayerOptions,
): Promise<ApplyStats> {
  const rootStat = await lstat(root).catch((err: unknown) => {
    destroyInput(layer);
    throw err;
  });
  if (!rootStat.isDirectory()) {
    destroyInput(layer);
    throw new Error(`${root} is not a directory`);
  }
  const applier = new LayerApplier(root, opts);
  const { diffId } = await readTar(layer as AsyncIterable<Buffer>, {
    what: "the layer",
    signal: opts.signal,
    onEntry: async (entry) => {
      try {
        await applier.apply(entry);
      } catch (err) {
        const name = quote(entry.header.name);
        if (err instanceof EntryProblem) throw new ImageArchiveError(`entry ${name} ${err.message}`);
        if (err instanceof ImageArchiveError && err.message.startsWith(`entry ${name} `)) throw err;
        throw withContext(err, `entry ${name}`);
      }
    },
  });
  await applier.finish();
  if (opts.expectDiffId !== undefined && opts.expectDiffId !== diffId) {
    throw new ImageArchiveError(
      `the layer's content (${diffId}) does not match its diff_id in the image config (${opts.expectDiffId}): the archive is corrupt`,
    );
  }
  return applier.stats;
}

/** A problem of one entry, said of it: "is owned by uid 70000, ..." (the entry's name goes before). */
class EntryProblem extends ImageArchiveError {}

/** Runs `fn` on `path` opened without following a final symlink. */
async function withHandle(path: string, flags: number, fn: (fh: FileHandle) => Promise<void>): Promise<void> {
  const fh = await open(path, flags | O_NOFOLLOW);
  try {
    await fn(fh);
  } finally {
    await fh.close();
  }
}

async function writeAll(fh: FileHandle, chunk: Buffer): Promise<void> {
  let off = 0;
  while (off < chunk.length) {
    const { bytesWritten } = await fh.write(chunk, off, chunk.length - off);
    off += bytesWritten;
  }
}

function paxNumber(pax: Record<string, string> | null | undefined, key: string): number | undefined {
  const v = pax?.[key];
  if (v === undefined || !/^\d+(\.\d*)?$/.test(v.trim())) return undefined;
  return Number(v.trim());
}

class LayerApplier {
  readonly stats = emptyStats();
  /** Real paths (below the root, "/"-joined, "" = the root) this layer wrote, and their ancestors. */
  private readonly touched = new Set<string>();
  /** Parent name as written in the archive → its resolved components; cleared when anything is removed. */
  private readonly dirs = new Map<string, string[]>();
  /** Directory mtimes, set at the end: entries written into a directory change its mtime. */
  private readonly dirTimes = new Map<string, Date>();

  constructor(
    private readonly root: string,
    private readonly opts: ApplyLayerOptions,
  ) {}

  async apply({ header, body }: TarEntry): Promise<void> {
    const components = entryComponents(header.name);
    const last = components[components.length - 1];
    if (last?.startsWith(WHITEOUT)) return this.whiteout(components, last);
    const type = header.type === undefined ? "file" : header.type; // null: a type tar-stream does not know
    if (type === "character-device" || type === "block-device") {
      return this.skip(header.name, `${type} not created (units get /dev from the runtime)`);
    }
    if (components.length === 0) return this.applyRoot(header, type);

    switch (type) {
      case "file":
      case "contiguous-file":
        return this.file(header, components, body);
      case "directory":
        return this.directory(header, components);
      case "symlink":
        return this.symlink(header, components);
      case "link":
        return this.hardlink(header, components);
      case "fifo":
        return this.fifo(header, components);
      default:
        return this.skip(header.name, `unsupported tar entry type${type ? ` ${type}` : ""}`);
    }
  }

  /** Sets the mtimes of the directories written, where they still are directories. */
  async finish(): Promise<void> {
    for (const [rel, mtime] of this.dirTimes) {
      const path = await existingDir(this.root, rel);
      if (path !== undefined) await withHandle(path, O_RDONLY | O_DIRECTORY, (fh) => fh.utimes(mtime, mtime));
    }
  }

  private skip(path: string, reason: string): void {
    this.stats.skippedTotal++;
    if (this.stats.skipped.length < MAX_SKIPPED_LISTED) this.stats.skipped.push({ path, reason });
  }

  private owner(header: TarHeader): { uid: number; gid: number } {
    const { uidShift, uidRange } = this.opts;
    const uid = paxNumber(header.pax, "uid") ?? header.uid ?? 0;
    const gid = paxNumber(header.pax, "gid") ?? header.gid ?? 0;
    for (const [what, id] of [
      ["uid", uid],
      ["gid", gid],
    ] as const) {
      if (!Number.isSafeInteger(id) || id < 0 || id >= uidRange) {
        throw new EntryProblem(
          `is owned by ${what} ${id}, outside the ${uidRange} ids a unit maps (0-${uidRange - 1})`,
        );
      }
    }
    return { uid: uid + uidShift, gid: gid + uidShift };
  }

  private mtime(header: TarHeader): Date {
    const pax = paxNumber(header.pax, "mtime");
    const d = pax !== undefined ? new Date(pax * 1000) : header.mtime;
    return d instanceof Date && !Number.isNaN(d.getTime()) ? d : new Date(0);
  }

  private mode(header: TarHeader, fallback: number): number {
    return (header.mode ?? fallback) & 0o7777;
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
  private readonly mkdirImplicit = async (path: string, components: readonly string[]): Promise<void> => {
    await mkdir(path, 0o700);
    const id = this.opts.uidShift;
    await withHandle(path, O_RDONLY | O_DIRECTORY, async (fh) => {
      await fh.chown(id, id);
      await fh.chmod(0o755);
    });
    this.markTouched(components.join("/"));
  };

  /** Where `components` goes: the parent resolved (made where missing) inside the root. */
  private async place(components: readonly string[]): Promise<ResolvedEntry> {
    const key = components.slice(0, -1).join("/");
    let parent = this.dirs.get(key);
    if (parent === undefined) {
      parent = (await resolveDir(this.root, components.slice(0, -1), { mkdir: this.mkdirImplicit })) as string[];
      this.dirs.set(key, parent);
    }
    const name = components[components.length - 1] as string;
    return { parent, name, path: join(this.root, ...parent, name), rel: [...parent, name].join("/") };
  }

  /**
   * A new regular file at `path`, opened for writing: whatever was there is removed first. O_EXCL
   * (with O_CREAT it never follows a symlink) and O_NOFOLLOW: the file is this one, nothing else.
   */
  private async create(path: string): Promise<FileHandle> {
    const flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
    try {
      return await open(path, flags, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    await this.remove(path);
    return open(path, flags, 0o600);
  }

  /** Removes what is at `path` (a directory with all in it; a symlink itself); whether there was anything. */
  private async remove(path: string): Promise<boolean> {
    let st: Awaited<ReturnType<typeof lstat>>;
    try {
      st = await lstat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw err;
    }
    this.dirs.clear(); // a resolved parent may have gone through what is removed
    if (st.isDirectory()) await rm(path, { recursive: true, force: true });
    else await unlink(path);
    return true;
  }

  private async whiteout(components: string[], last: string): Promise<void> {
    const parent = await resolveDir(this.root, components.slice(0, -1));
    if (last === OPAQUE) {
      this.stats.whiteouts++;
      if (parent === undefined) return;
      const rel = parent.join("/");
      this.markTouched(rel);
      await this.prune(rel);
      return;
    }
    if (last.startsWith(`${WHITEOUT}${WHITEOUT}`)) {
      return this.skip(components.join("/"), "aufs metadata entry ignored");
    }
    const name = last.slice(WHITEOUT.length);
    if (name === "" || name === "." || name === "..") {
      throw new EntryProblem(`is a whiteout of ${quote(name)}, which is not a name`);
    }
    this.stats.whiteouts++;
    if (parent !== undefined) await this.remove(join(this.root, ...parent, name));
  }

  /** Removes from the directory `rel` (recursively) all this layer did not write. */
  private async prune(rel: string): Promise<void> {
    const dir = rel === "" ? this.root : join(this.root, rel);
    for (const name of await readdir(dir)) {
      const childRel = rel === "" ? name : `${rel}/${name}`;
      const path = join(dir, name);
      if (!this.touched.has(childRel)) await this.remove(path);
      else if ((await lstat(path)).isDirectory()) await this.prune(childRel);
    }
  }

  private async xattrs(header: TarHeader, name: string, path: string, regularFile: boolean): Promise<void> {
    for (const x of paxXattrs(header.pax)) {
      if (x.name !== "security.capability" || !regularFile) {
        this.skip(name, `xattr ${x.name} not kept`);
      } else if (x.value === undefined) {
        this.skip(name, "security.capability not kept: its value could not be decoded");
      } else {
        const problem = await writeCapability(path, x.value, this.opts.uidShift);
        if (problem !== undefined) this.skip(name, problem);
      }
    }
  }

  private async applyRoot(header: TarHeader, type: string | null): Promise<void> {
    if (type !== "directory")
      throw new EntryProblem(`is a ${type ?? "special entry"}: the image's root must be a directory`);
    const { uid, gid } = this.owner(header);
    await withHandle(this.root, O_RDONLY | O_DIRECTORY, async (fh) => {
      await fh.chown(uid, gid);
      await fh.chmod(this.mode(header, 0o755));
    });
    await this.xattrs(header, header.name, this.root, false);
    this.dirTimes.set("", this.mtime(header));
    this.markTouched("");
    this.stats.entries++;
  }

  private async file(header: TarHeader, components: string[], body: AsyncIterable<Buffer>): Promise<void> {
    const { uid, gid } = this.owner(header);
    const at = await this.place(components);
    const fh = await this.create(at.path);
    try {
      // Written in batches: one write per chunk of the stream (often 16-64 KiB) is slow.
      const pending: Buffer[] = [];
      let pendingBytes = 0;
      const flush = async () => {
        if (pendingBytes === 0) return;
        await writeAll(fh, pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, pendingBytes));
        pending.length = 0;
        pendingBytes = 0;
      };
      for await (const chunk of body) {
        this.opts.signal?.throwIfAborted();
        pending.push(chunk);
        pendingBytes += chunk.length;
        this.stats.bytes += chunk.length;
        if (pendingBytes >= WRITE_BATCH) await flush();
      }
      await flush();
      await fh.chown(uid, gid);
      await fh.chmod(this.mode(header, 0o644)); // after chown, which clears setuid/setgid
      await this.xattrs(header, header.name, at.path, true); // a capability too: chown clears it
      const mtime = this.mtime(header);
      await fh.utimes(mtime, mtime);
    } finally {
      await fh.close();
    }
    this.markTouched(at.rel);
    this.stats.entries++;
  }

  private async directory(header: TarHeader, components: string[]): Promise<void> {
    const { uid, gid } = this.owner(header);
    const at = await this.place(components);
    const existing = await lstat(at.path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    if (!existing?.isDirectory()) {
      if (existing) await this.remove(at.path);
      await mkdir(at.path, 0o700);
    }
    await withHandle(at.path, O_RDONLY | O_DIRECTORY, async (fh) => {
      await fh.chown(uid, gid);
      await fh.chmod(this.mode(header, 0o755));
    });
    await this.xattrs(header, header.name, at.path, false);
    this.dirTimes.set(at.rel, this.mtime(header));
    this.markTouched(at.rel);
    this.stats.entries++;
  }

  private async symlink(header: TarHeader, components: string[]): Promise<void> {
    const { uid, gid } = this.owner(header);
    const target = header.linkname ?? "";
    if (target === "") throw new EntryProblem("is a symlink with an empty target");
    if (target.includes("\0")) throw new EntryProblem("is a symlink whose target has a NUL byte");
    const at = await this.place(components);
    await this.remove(at.path);
    await symlink(target, at.path); // the target is only data: never resolved here
    await lchown(at.path, uid, gid);
    await this.xattrs(header, header.name, at.path, false);
    const mtime = this.mtime(header);
    await lutimes(at.path, mtime, mtime);
    this.markTouched(at.rel);
    this.stats.entries++;
  }

  private async hardlink(header: TarHeader, components: string[]): Promise<void> {
    const linkname = header.linkname ?? "";
    let targetComponents: string[];
    try {
      targetComponents = entryComponents(linkname);
    } catch {
      throw new EntryProblem(`is a hard link to ${quote(linkname)}, which leaves the image`);
    }
    const missing = () => new EntryProblem(`is a hard link to ${quote(linkname)}, which is not in the image`);
    if (targetComponents.length === 0) throw new EntryProblem("is a hard link to the image's root directory");
    const target = await resolveEntry(this.root, targetComponents);
    if (target === undefined) throw missing();
    const st = await lstat(target.path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    if (st === undefined) throw missing();
    if (st.isDirectory()) throw new EntryProblem(`is a hard link to ${quote(linkname)}, which is a directory`);
    const at = await this.place(components);
    if (at.path === target.path) return; // a link to itself: nothing to do
    await this.remove(at.path);
    try {
      await link(target.path, at.path); // link(2) does not follow a symlink target: it links the symlink
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw missing(); // removed with what it replaced
      throw err;
    }
    this.markTouched(at.rel);
    this.stats.entries++;
  }

  private async fifo(header: TarHeader, components: string[]): Promise<void> {
    const { uid, gid } = this.owner(header);
    const at = await this.place(components);
    await this.remove(at.path);
    try {
      await run("mkfifo", ["-m", "600", "--", at.path]);
    } catch (err) {
      if (err instanceof CommandError) return this.skip(header.name, `FIFO not created: ${err.message}`);
      throw err;
    }
    await withHandle(at.path, O_RDONLY | O_NONBLOCK, async (fh) => {
      await fh.chown(uid, gid);
      await fh.chmod(this.mode(header, 0o644));
      const mtime = this.mtime(header);
      await fh.utimes(mtime, mtime);
    });
    await this.xattrs(header, header.name, at.path, false);
    this.markTouched(at.rel);
    this.stats.entries++;
  }
}
