import { constants, type Stats } from "node:fs";
import {
  chmod,
  chown,
  copyFile,
  lchown,
  lstat,
  lutimes,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  rmdir,
  stat,
  symlink,
  unlink,
  utimes,
} from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fsErrorStatus } from "@ums/protocol/fs-errors";

// The filesystem operations of spec 4.4, run by the agent (or its worker, see worker.ts) inside the unit:
// every path is resolved by the kernel in the unit's mount namespace, so no `..`, absolute path or symlink
// can reach a host file. Paths arrive absolute (the host resolves `workingDir`). Failures are FsOpError
// with the errno name and the path they are about (DESIGN.md section 8).

export class FsOpError extends Error {
  constructor(
    readonly code: string,
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

/** HTTP status of an errno name: the one table, in @ums/protocol. */
export const statusOf = fsErrorStatus;

/** Turns a node fs error into an FsOpError; `path` is used when the error names none. */
export function toFsError(err: unknown, path: string): FsOpError {
  if (err instanceof FsOpError) return err;
  const e = err as NodeJS.ErrnoException;
  const code = typeof e?.code === "string" && /^E[A-Z0-9]+$/.test(e.code) ? e.code : "EIO";
  // Two-path calls (rename, symlink, copyFile) name the destination in `dest`: that is the path an
  // EEXIST, ENOTEMPTY or EISDIR is about.
  const dest = (e as { dest?: unknown })?.dest;
  const at =
    typeof dest === "string" && ["EEXIST", "ENOTEMPTY", "EISDIR"].includes(code)
      ? dest
      : typeof e?.path === "string"
        ? e.path
        : path;
  const what = e?.syscall ? `${e.syscall} ` : "";
  return new FsOpError(code, at, `${code}: ${describe(code)}, ${what}'${at}'`);
}

function describe(code: string): string {
  const m: Record<string, string> = {
    ENOENT: "no such file or directory",
    EEXIST: "file already exists",
    EACCES: "permission denied",
    EPERM: "operation not permitted",
    ENOTDIR: "not a directory",
    EISDIR: "is a directory",
    ENOTEMPTY: "directory not empty",
    EINVAL: "invalid argument",
    ELOOP: "too many symbolic links",
    EXDEV: "cross-device link",
    ENOSPC: "no space left on device",
  };
  return m[code] ?? "operation failed";
}

const wrap = async <T>(path: string, fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    throw toFsError(err, path);
  }
};

export const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, "0");

export function parseMode(text: string): number | null {
  return /^0?[0-7]{3,4}$/.test(text) ? Number.parseInt(text, 8) : null;
}

export interface Entry {
  name: string;
  path: string;
  type: "file" | "directory" | "symlink" | "fifo" | "socket" | "char" | "block" | "unknown";
  size: number;
  mode: string;
  modTime: string;
  isDir: boolean;
}

function typeOf(st: Stats): Entry["type"] {
  if (st.isFile()) return "file";
  if (st.isDirectory()) return "directory";
  if (st.isSymbolicLink()) return "symlink";
  if (st.isFIFO()) return "fifo";
  if (st.isSocket()) return "socket";
  if (st.isCharacterDevice()) return "char";
  if (st.isBlockDevice()) return "block";
  return "unknown";
}

export function entryOf(path: string, st: Stats): Entry {
  const type = typeOf(st);
  return {
    name: basename(path) || "/",
    path,
    type,
    size: st.size,
    mode: octal(st.mode),
    modTime: st.mtime.toISOString(),
    isDir: type === "directory",
  };
}

export const MAX_LIST = 10_000;

/** Lists a directory (following a symlink to one); a file is listed as its one entry (DESIGN.md section 8). */
/** A glob of `*` and `?` (anything else literal) as an anchored regular expression on a name. */
export function globRegExp(glob: string): RegExp {
  const body = glob
    .split("")
    .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[\\^$.|+()[\]{}]/g, "\\$&")))
    .join("");
  return new RegExp(`^${body}$`, "s");
}

export async function list(
  path: string,
  recursive: boolean,
  pattern: string | null = null,
): Promise<{ path: string; entries: Entry[]; count: number }> {
  const match = pattern ? globRegExp(pattern) : null;
  const st = await wrap(path, () => stat(path));
  if (!st.isDirectory()) {
    const own = await wrap(path, () => lstat(path));
    return { path, entries: [entryOf(path, own)], count: 1 };
  }
  const entries: Entry[] = [];
  const queue = [path];
  while (queue.length > 0 && entries.length < MAX_LIST) {
    const dir = queue.shift() as string;
    let names: string[];
    try {
      names = (await readdir(dir)).sort();
    } catch (err) {
      if (dir === path) throw toFsError(err, dir);
      continue; // a subdirectory we may not read, or that went away meanwhile
    }
    for (const name of names) {
      if (entries.length >= MAX_LIST) break;
      const p = join(dir, name);
      let s: Stats;
      try {
        s = await lstat(p);
      } catch {
        continue; // removed meanwhile
      }
      const e = entryOf(p, s);
      if (!match || match.test(name)) entries.push(e);
      if (recursive && e.isDir) queue.push(p);
    }
  }
  return { path, entries, count: entries.length };
}

/** Post-order walk that never follows symlinks; `visit` sees every path below and including `root`. */
async function walk(
  root: string,
  visit: (p: string, st: Stats) => Promise<void>,
  order: "pre" | "post",
): Promise<void> {
  const st = await wrap(root, () => lstat(root));
  if (order === "pre") await visit(root, st);
  if (st.isDirectory()) {
    const names = await wrap(root, () => readdir(root));
    for (const n of names.sort()) await walk(join(root, n), visit, order);
  }
  if (order === "post") await visit(root, st);
}

export async function chmodOp(
  path: string,
  mode: number,
  recursive: boolean,
): Promise<{ affected: { path: string; mode: string }[]; count: number }> {
  const affected: { path: string; mode: string }[] = [];
  const top = await wrap(path, () => stat(path));
  await wrap(path, () => chmod(path, mode));
  affected.push({ path, mode: octal(mode) });
  if (recursive && top.isDirectory()) {
    const names = await wrap(path, () => readdir(path));
    for (const n of names.sort()) {
      await walk(
        join(path, n),
        async (p, st) => {
          if (st.isSymbolicLink()) return; // chmod would follow it out of the tree
          await wrap(p, () => chmod(p, mode));
          affected.push({ path: p, mode: octal(mode) });
        },
        "pre",
      );
    }
  }
  return { affected, count: affected.length };
}

/** A numeric id, a numeric string, or a name looked up in the unit's /etc/passwd or /etc/group. */
export async function resolveOwner(
  value: number | string | undefined,
  file: "/etc/passwd" | "/etc/group",
): Promise<number> {
  if (value === undefined || value === null) return -1;
  if (typeof value === "number") return value;
  if (/^\d+$/.test(value)) return Number(value);
  let text = "";
  try {
    text = await readFile(file, "utf8");
  } catch {}
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f[0] === value && f[2] !== undefined && /^\d+$/.test(f[2])) return Number(f[2]);
  }
  throw new FsOpError("EINVAL", file, `EINVAL: unknown ${file === "/etc/passwd" ? "user" : "group"} '${value}'`);
}

export async function chownOp(
  path: string,
  uidIn: number | string | undefined,
  gidIn: number | string | undefined,
  recursive: boolean,
): Promise<{ affected: { path: string; uid: number; gid: number }[]; count: number }> {
  const uid = await resolveOwner(uidIn, "/etc/passwd");
  const gid = await resolveOwner(gidIn, "/etc/group");
  const affected: { path: string; uid: number; gid: number }[] = [];
  const top = await wrap(path, () => stat(path));
  await wrap(path, () => chown(path, uid, gid));
  affected.push({ path, uid: uid === -1 ? top.uid : uid, gid: gid === -1 ? top.gid : gid });
  if (recursive && top.isDirectory()) {
    const names = await wrap(path, () => readdir(path));
    for (const n of names.sort()) {
      await walk(
        join(path, n),
        async (p, st) => {
          await wrap(p, () => lchown(p, uid, gid));
          affected.push({ path: p, uid: uid === -1 ? st.uid : uid, gid: gid === -1 ? st.gid : gid });
        },
        "pre",
      );
    }
  }
  return { affected, count: affected.length };
}

export async function deleteOp(path: string, recursive: boolean): Promise<{ deleted: string[]; count: number }> {
  const st = await wrap(path, () => lstat(path));
  const deleted: string[] = [];
  if (!st.isDirectory()) {
    await wrap(path, () => unlink(path));
    deleted.push(path);
  } else if (!recursive) {
    await wrap(path, () => rmdir(path));
    deleted.push(path);
  } else {
    await walk(
      path,
      async (p, s) => {
        await wrap(p, () => (s.isDirectory() ? rmdir(p) : unlink(p)));
        deleted.push(p);
      },
      "post",
    );
  }
  return { deleted, count: deleted.length };
}

export async function renameOp(source: string, dest: string): Promise<{ source: string; dest: string }> {
  await wrap(source, async () => {
    await lstat(source);
    await rename(source, dest);
  });
  return { source, dest };
}

async function exists(p: string): Promise<Stats | null> {
  try {
    return await stat(p);
  } catch {
    return null;
  }
}

export async function copyOp(
  source: string,
  destIn: string,
  recursive: boolean,
  preserveAttrs: boolean,
): Promise<{ copied: { source: string; dest: string }[]; count: number; totalBytes: number }> {
  const st = await wrap(source, () => lstat(source));
  if (st.isDirectory() && !recursive) {
    throw new FsOpError("EISDIR", source, `EISDIR: is a directory (copy it with recursive: true), '${source}'`);
  }
  // cp semantics: copying onto an existing directory puts the copy inside it.
  const destStat = await exists(destIn);
  const dest = destStat?.isDirectory() ? join(destIn, basename(source)) : destIn;
  if (dest === source || (st.isDirectory() && `${dest}/`.startsWith(`${source}/`))) {
    throw new FsOpError("EINVAL", dest, `EINVAL: cannot copy '${source}' into itself ('${dest}')`);
  }
  const copied: { source: string; dest: string }[] = [];
  let totalBytes = 0;
  const attrs = async (to: string, s: Stats) => {
    if (!preserveAttrs) return;
    if (!s.isSymbolicLink()) await wrap(to, () => chmod(to, s.mode & 0o7777));
    try {
      await lchown(to, s.uid, s.gid);
    } catch (err) {
      // like cp -p: a user cannot give files away; keeping the copier's ownership is not an error
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EPERM" && code !== "EINVAL") throw toFsError(err, to);
    }
    await wrap(to, () => (s.isSymbolicLink() ? lutimes(to, s.atime, s.mtime) : utimes(to, s.atime, s.mtime)));
  };
  const copyOne = async (from: string, to: string): Promise<void> => {
    const s = await wrap(from, () => lstat(from));
    if (s.isDirectory()) {
      await wrap(to, () =>
        mkdir(to, { mode: s.mode & 0o7777 }).catch(async (err: NodeJS.ErrnoException) => {
          if (err.code !== "EEXIST" || !(await exists(to))?.isDirectory()) throw err;
        }),
      );
      copied.push({ source: from, dest: to });
      const names = await wrap(from, () => readdir(from));
      for (const n of names.sort()) await copyOne(join(from, n), join(to, n));
      await attrs(to, s);
    } else if (s.isSymbolicLink()) {
      const target = await wrap(from, () => readlink(from));
      await wrap(to, () => symlink(target, to));
      copied.push({ source: from, dest: to });
      await attrs(to, s);
    } else if (s.isFile()) {
      // FICLONE: a reflink on btrfs (no data copied), a plain copy elsewhere.
      await wrap(to, () => copyFile(from, to, constants.COPYFILE_FICLONE));
      totalBytes += s.size;
      copied.push({ source: from, dest: to });
      await attrs(to, s);
    } else {
      throw new FsOpError("EINVAL", from, `EINVAL: cannot copy a special file, '${from}'`);
    }
  };
  await wrap(dirname(dest), () => stat(dirname(dest)));
  await copyOne(source, dest);
  return { copied, count: copied.length, totalBytes };
}
