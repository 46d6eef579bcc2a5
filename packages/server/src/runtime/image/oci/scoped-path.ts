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
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw new ImageArchiveError(`entry ${quote(name)} leaves the image (a '..' in its name)`);
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
  const maxLinks = opts.maxLinks ?? MAX_SYMLINKS;
  const todo = components.slice().reverse(); // a stack: the next component is the last element
  const cur: string[] = [];
  let links = 0;
  for (let c = todo.pop(); c !== undefined; c = todo.pop()) {
    if (c === "" || c === ".") continue;
    if (c === "..") {
      cur.pop(); // at the root, ".." is the root
      continue;
    }
    const path = join(root, ...cur, c);
    let st: Awaited<ReturnType<typeof lstat>>;
    try {
      st = await lstat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      if (!opts.mkdir) return undefined;
      cur.push(c);
      await opts.mkdir(path, cur.slice());
      continue;
    }
    if (st.isSymbolicLink()) {
      if (++links > maxLinks) {
        throw new ImageArchiveError(`too many levels of symbolic links at ${quote([...cur, c].join("/"))}`);
      }
      const target = await readlink(path);
      if (target.startsWith("/")) cur.length = 0;
      const parts = target.split("/");
      for (let i = parts.length - 1; i >= 0; i--) todo.push(parts[i] as string);
    } else if (st.isDirectory()) {
      cur.push(c);
    } else {
      throw new ImageArchiveError(`${quote([...cur, c].join("/"))} is not a directory`);
    }
  }
  return cur;
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
