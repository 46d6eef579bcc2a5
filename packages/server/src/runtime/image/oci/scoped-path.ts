import { lstatSync, readlinkSync } from "node:fs";
import { lstat, readlink } from "node:fs/promises";
import { join } from "node:path";
import { ImageArchiveError, quote } from "./errors.js";

/*
 * Paths inside an image root, resolved as if the root were `/` (chroot semantics): a symlink met on
 * the way is followed, an absolute target starts again at the root, and ".." never climbs above it.
 * Every directory of a resolved path has been lstat'ed and is a real directory, so the host path
 * built from them contains no symlink: the kernel cannot be led outside the root by it (nobody else
 * writes into the root while an image is imported, so what was lstat'ed stays so).
 */

/** Symlinks followed while resolving one path at most (Linux's MAXSYMLINKS). */
export const MAX_SYMLINKS = 40;

/**
 * The components of an archive entry name below the root: leading "/" and "./" are dropped, as are
 * empty and "." components and a trailing "/"; [] is the root itself. A ".." component (or a NUL
 * byte) is refused with an {@link ImageArchiveError}, even where it would stay inside.
 */
export function entryComponents(name: string): string[] {
  if (name.includes("\0")) throw new ImageArchiveError(`entry ${quote(name)} has a NUL byte in its name`);
  const parts: string[] = [];
  for (let start = 0; start <= name.length; ) {
    let end = name.indexOf("/", start);
    if (end < 0) end = name.length;
    if (end > start) {
      const p = name.slice(start, end);
      if (p === "..") throw new ImageArchiveError(`entry ${quote(name)} leaves the image (a '..' in its name)`);
      if (p !== ".") parts.push(p);
    }
    start = end + 1;
  }
  return parts;
}

export interface ResolveOptions {
  /**
   * Called for a directory that does not exist (its host path and its components below the root),
   * which it must create; without it a missing directory makes the result undefined.
   */
  mkdir?: (path: string, components: readonly string[]) => Promise<void>;
  /** Symlinks to follow at most; default {@link MAX_SYMLINKS}. */
  maxLinks?: number;
}

/** What an lstat found, as a resolution needs it: undefined when nothing is there. */
type Kind = "directory" | "symlink" | "other" | undefined;

/** A host operation a resolution needs, and what it gives back (see {@link resolveSteps}). */
type Step =
  | { op: "lstat"; path: string; rel: string } // → Kind
  | { op: "readlink"; path: string } // → the link's target
  | { op: "mkdir"; path: string; components: string[] }; // → nothing

function kindOf(st: { isDirectory(): boolean; isSymbolicLink(): boolean } | undefined): Kind {
  if (st === undefined) return undefined;
  return st.isDirectory() ? "directory" : st.isSymbolicLink() ? "symlink" : "other";
}

/**
 * The resolution of {@link resolveDir}, as a generator of the host operations it needs: one
 * algorithm, driven with promises ({@link resolveDir}) or synchronously ({@link resolveDirSync}).
 */
function* resolveSteps(
  root: string,
  components: readonly string[],
  maxLinks: number,
  mkdir: boolean,
  start: Resolved = { dir: [], links: 0 },
): Generator<Step, Resolved | undefined, unknown> {
  const todo = components.slice().reverse(); // a stack: the next component is the last element
  const cur = start.dir.slice();
  let links = start.links;
  for (let c = todo.pop(); c !== undefined; c = todo.pop()) {
    if (c === "" || c === ".") continue;
    if (c === "..") {
      cur.pop(); // at the root, ".." is the root
      continue;
    }
    const path = join(root, ...cur, c);
    const kind = (yield { op: "lstat", path, rel: cur.length === 0 ? c : `${cur.join("/")}/${c}` }) as Kind;
    if (kind === undefined) {
      if (!mkdir) return undefined;
      cur.push(c);
      yield { op: "mkdir", path, components: cur.slice() };
    } else if (kind === "symlink") {
      if (++links > maxLinks) {
        throw new ImageArchiveError(`too many levels of symbolic links at ${quote([...cur, c].join("/"))}`);
      }
      const target = (yield { op: "readlink", path }) as string;
      if (target.startsWith("/")) cur.length = 0;
      const parts = target.split("/");
      for (let i = parts.length - 1; i >= 0; i--) todo.push(parts[i] as string);
    } else if (kind === "directory") {
      cur.push(c);
    } else {
      throw new ImageArchiveError(`${quote([...cur, c].join("/"))} is not a directory`);
    }
  }
  return { dir: cur, links };
}

/** A directory reached by a resolution: its components below the root, and the symlinks followed on the way. */
export interface Resolved {
  dir: string[];
  links: number;
}

/**
 * Resolves `components` below `root` to a directory with chroot semantics, following every symlink
 * on the way (the last component too). Returns the components of the directory reached, none of
 * them a symlink, or undefined when one is missing (and `opts.mkdir` is not given). Throws an
 * {@link ImageArchiveError} when a component is not a directory or there are too many symlinks (a
 * loop).
 */
export async function resolveDir(
  root: string,
  components: readonly string[],
  opts: ResolveOptions = {},
): Promise<string[] | undefined> {
  const steps = resolveSteps(root, components, opts.maxLinks ?? MAX_SYMLINKS, opts.mkdir !== undefined);
  for (let r = steps.next(); ; ) {
    if (r.done) return r.value?.dir;
    const step = r.value;
    if (step.op === "lstat") {
      const st = await lstat(step.path).catch((err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return undefined;
        throw err;
      });
      r = steps.next(kindOf(st));
    } else if (step.op === "readlink") {
      r = steps.next(await readlink(step.path));
    } else {
      await opts.mkdir?.(step.path, step.components);
      r = steps.next();
    }
  }
}

/** Options of {@link resolveDirSync}: those of {@link resolveDir}, synchronous. */
export interface ResolveSyncOptions {
  /** Called for a missing directory, which it must create; without it the result is undefined. */
  mkdir?: (path: string, components: readonly string[]) => void;
  /** Symlinks to follow at most; default {@link MAX_SYMLINKS}. */
  maxLinks?: number;
  /**
   * Called with every path (below the root, "/"-joined) the resolution looked at: the directories
   * it went through (those it made too) and the symlinks it followed. A resolution stays right as
   * long as none of them is removed or replaced.
   */
  visit?: (rel: string) => void;
}

/** {@link resolveDir} with synchronous calls (for a worker thread, where blocking is fine). */
export function resolveDirSync(
  root: string,
  components: readonly string[],
  opts: ResolveSyncOptions = {},
): string[] | undefined {
  return resolveFromSync(root, { dir: [], links: 0 }, components, opts)?.dir;
}

/**
 * {@link resolveDirSync} of `components` from `start`, where a resolution of the components before
 * them got: resolving a path goes component after component, so it is the same as resolving them all
 * from the root (the symlinks followed before count toward `maxLinks`).
 */
export function resolveFromSync(
  root: string,
  start: Resolved,
  components: readonly string[],
  opts: ResolveSyncOptions = {},
): Resolved | undefined {
  const steps = resolveSteps(root, components, opts.maxLinks ?? MAX_SYMLINKS, opts.mkdir !== undefined, start);
  for (let r = steps.next(); ; ) {
    if (r.done) return r.value;
    const step = r.value;
    if (step.op === "lstat") {
      opts.visit?.(step.rel);
      r = steps.next(kindOf(lstatSync(step.path, { throwIfNoEntry: false })));
    } else if (step.op === "readlink") {
      r = steps.next(readlinkSync(step.path));
    } else {
      opts.mkdir?.(step.path, step.components);
      r = steps.next();
    }
  }
}

/** Where an entry goes: its parent resolved inside the root, its own name not followed. */
export interface ResolvedEntry {
  /** Components of the parent directory below the root (real directories, no symlinks). */
  parent: string[];
  /** The last component of the entry's name. */
  name: string;
  /** Host path of the entry: root/parent.../name. */
  path: string;
  /** The entry's real path below the root: `parent/name` joined with "/". */
  rel: string;
}

/**
 * Resolves the parent of `components` (non-empty) with {@link resolveDir}; the last component is
 * kept as it is (never followed: the caller replaces or inspects it with lstat). Undefined when the
 * parent is missing and `opts.mkdir` is not given.
 */
export async function resolveEntry(
  root: string,
  components: readonly string[],
  opts: ResolveOptions = {},
): Promise<ResolvedEntry | undefined> {
  const name = components[components.length - 1];
  if (name === undefined || name === "." || name === ".." || name === "" || name.includes("/")) {
    throw new Error(`resolveEntry: invalid components ${JSON.stringify(components)}`);
  }
  const parent = await resolveDir(root, components.slice(0, -1), opts);
  if (parent === undefined) return undefined;
  return { parent, name, path: join(root, ...parent, name), rel: [...parent, name].join("/") };
}

/**
 * The host path of `rel` (components joined with "/") when each of its components is, right now, a
 * real directory (no symlink followed); undefined otherwise. For checking again a path resolved
 * earlier, after entries may have been replaced.
 */
export async function existingDir(root: string, rel: string): Promise<string | undefined> {
  let path = root;
  for (const c of rel.split("/")) {
    if (c === "") continue;
    if (c === "." || c === "..") return undefined;
    path = join(path, c);
    try {
      if (!(await lstat(path)).isDirectory()) return undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "ENOTDIR") {
        return undefined;
      }
      throw err;
    }
  }
  return path;
}

/**
 * {@link existingDir} with synchronous calls; `known` (optional) remembers the answer for each
 * directory checked (rel → real directory or not), for checking many paths in a row.
 */
export function existingDirSync(root: string, rel: string, known?: Map<string, boolean>): string | undefined {
  let path = root;
  let sub = "";
  for (const c of rel.split("/")) {
    if (c === "") continue;
    if (c === "." || c === "..") return undefined;
    path = join(path, c);
    sub = sub === "" ? c : `${sub}/${c}`;
    let isDir = known?.get(sub);
    if (isDir === undefined) {
      try {
        isDir = lstatSync(path, { throwIfNoEntry: false })?.isDirectory() ?? false;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOTDIR") throw err;
        isDir = false;
      }
      known?.set(sub, isDir);
    }
    if (!isDir) return undefined;
  }
  return path;
}

/**
 * The host path of `path` inside `root` with chroot semantics (leading "/" or not; ".." stops at the
 * root), for reading a file of an image. Its directories are real ones below the root; with
 * `followFinal` a symlink at the end is followed too (inside the root), else the path names the
 * symlink itself. The final entry may be missing; a missing directory is an ENOENT error.
 */
export async function resolveInRoot(
  root: string,
  path: string | readonly string[],
  opts: { followFinal?: boolean; maxLinks?: number } = {},
): Promise<string> {
  const clean = (parts: readonly string[]) => parts.filter((p) => p !== "" && p !== ".");
  let components = clean(typeof path === "string" ? path.split("/") : path);
  let budget = opts.maxLinks ?? MAX_SYMLINKS;
  const missing = () =>
    Object.assign(new Error(`ENOENT: no such directory for '${String(path)}' in the image`), { code: "ENOENT" });
  for (;;) {
    const last = components[components.length - 1];
    if (last === undefined) return root;
    if (last === "..") {
      const dir = await resolveDir(root, components, { maxLinks: budget });
      if (dir === undefined) throw missing();
      return join(root, ...dir);
    }
    const parent = await resolveDir(root, components.slice(0, -1), { maxLinks: budget });
    if (parent === undefined) throw missing();
    const host = join(root, ...parent, last);
    if (!opts.followFinal) return host;
    const st = await lstat(host).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    if (!st?.isSymbolicLink()) return host;
    if (--budget < 0) throw new ImageArchiveError(`too many levels of symbolic links at ${quote(String(path))}`);
    const target = await readlink(host);
    components = clean([...(target.startsWith("/") ? [] : parent), ...target.split("/")]);
  }
}
