import { constants, type Stats } from "node:fs";
import {
  chmod,
  chown,
  copyFile,
  type FileHandle,
  lchown,
  lstat,
  lutimes,
  mkdir,
  open,
  readdir,
  readFile,
  readlink,
  rename,
  rmdir,
  symlink,
  unlink,
  utimes,
} from "node:fs/promises";
import { basename, isAbsolute, join } from "node:path";
import { FS_RESERVED_PATH, isReservedPath, normalizeAbsolute } from "@ums/protocol/fs-reserved";
import { FsOpError, fsFailure } from "./errors.js";
import { Guard, type Pinned, reserved } from "./guard.js";

export { FsOpError, statusOf, toFsError } from "./errors.js";

// The filesystem operations of spec 4.4, run by the agent (or its worker, see worker.ts) inside the unit:
// every path is resolved by the kernel in the unit's mount namespace, so no `..`, absolute path or symlink
// can reach a host file. Paths arrive absolute (the host resolves `workingDir`). Nothing in /.unit but
// what the spec shows there read-only is reached, and every object is used through the descriptor it
// was checked by, never by its path a second time (guard.ts). Failures are FsOpError with the errno
// name and the path they are about (errors.ts).

/** Runs a call made through /proc/self/fd paths; its failure names `shown`, the caller's path. */
const at = async <T>(shown: string, syscall: string, fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    throw fsFailure(err, shown, syscall);
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

/** A glob of `*` and `?` (anything else literal) as an anchored regular expression on a name. */
export function globRegExp(glob: string): RegExp {
  const body = glob
    .split("")
    .map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[\\^$.|+()[\]{}]/g, "\\$&")))
    .join("");
  return new RegExp(`^${body}$`, "s");
}

const isReservedError = (err: unknown): boolean => err instanceof FsOpError && err.code === FS_RESERVED_PATH;

/** A directory below a listed one, by its real path: null when reserved (/.unit below /), gone, or moved. */
async function openBelow(g: Guard, real: string, shown: string): Promise<Pinned | null> {
  const d = await g.open(real, "read", { follow: false, directory: true }, shown).catch(() => null);
  if (!d || d.real === real) return d;
  await d.close();
  return null;
}

/** Lists a directory (following a symlink to one); a file is listed as its one entry (spec 4.4). */
export async function list(
  path: string,
  recursive: boolean,
  pattern: string | null = null,
): Promise<{ path: string; entries: Entry[]; count: number }> {
  const match = pattern ? globRegExp(pattern) : null;
  const g = new Guard();
  const top = await g.pin(path, "read", { follow: true, syscall: "stat" });
  try {
    if (!(await top.stat()).isDirectory()) {
      const own = await g.pin(path, "read", { follow: false, syscall: "lstat" });
      try {
        return { path, entries: [entryOf(path, await own.stat())], count: 1 };
      } finally {
        await own.close();
      }
    }
    const entries: Entry[] = [];
    // Directories below are opened again by their real path, not followed through a symlink: one that was
    // swapped for a link meanwhile is not there any more, and one that moved is skipped.
    const queue: { shown: string; real: string }[] = [];
    let dir: Pinned | null = top;
    for (;;) {
      if (dir) {
        let names: string[];
        try {
          names = (await readdir(dir.proc)).sort();
        } catch (err) {
          if (dir === top) throw fsFailure(err, path, "scandir");
          names = []; // a subdirectory we may not read
        }
        for (const name of names) {
          if (entries.length >= MAX_LIST) break;
          let s: Stats;
          try {
            s = await lstat(dir.at(name));
          } catch {
            continue; // removed meanwhile
          }
          const e = entryOf(join(dir.shown, name), s);
          if (!match || match.test(name)) entries.push(e);
          if (recursive && e.isDir) queue.push({ shown: e.path, real: join(dir.real, name) });
        }
        if (dir !== top) await dir.close();
      }
      const next = queue.shift();
      if (!next || entries.length >= MAX_LIST) break;
      dir = await openBelow(g, next.real, next.shown);
    }
    return { path, entries, count: entries.length };
  } finally {
    await top.close();
  }
}

/** One object met by `walk`: a name in a pinned directory, itself pinned (never through a symlink). */
interface Node {
  readonly parent: Pinned;
  readonly name: string;
  readonly self: Pinned;
  readonly shown: string;
  readonly st: Stats;
}

/**
 * Visits everything below the pinned directory `dir`, pre- or post-order, sorted by name, never
 * following a symlink: each name is opened in its pinned parent (O_NOFOLLOW) and checked for `access`;
 * a reserved one (a bind of /.unit) fails the whole operation.
 */
async function walk(
  g: Guard,
  dir: Pinned,
  access: "read" | "write",
  visit: (n: Node) => Promise<void>,
  order: "pre" | "post",
): Promise<void> {
  const names = await at(dir.shown, "scandir", () => readdir(dir.proc));
  for (const name of names.sort()) {
    const self = await g.pinIn(dir, name, access, { follow: false, syscall: "lstat" });
    try {
      const st = await at(self.shown, "lstat", () => self.stat());
      const node = { parent: dir, name, self, shown: self.shown, st };
      if (order === "pre") await visit(node);
      if (st.isDirectory()) await walk(g, self, access, visit, order);
      if (order === "post") await visit(node);
    } finally {
      await self.close();
    }
  }
}

export async function chmodOp(
  path: string,
  mode: number,
  recursive: boolean,
): Promise<{ affected: { path: string; mode: string }[]; count: number }> {
  const affected: { path: string; mode: string }[] = [];
  const g = new Guard();
  const top = await g.pin(path, "write", { follow: true, syscall: "chmod" });
  try {
    const st = await top.stat();
    await at(path, "chmod", () => chmod(top.proc, mode));
    affected.push({ path, mode: octal(mode) });
    if (recursive && st.isDirectory()) {
      await walk(
        g,
        top,
        "write",
        async (n) => {
          if (n.st.isSymbolicLink()) return; // chmod would follow it out of the tree
          await at(n.shown, "chmod", () => chmod(n.self.proc, mode));
          affected.push({ path: n.shown, mode: octal(mode) });
        },
        "pre",
      );
    }
  } finally {
    await top.close();
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
  const db = await new Guard().pin(file, "read", { follow: true }).catch(() => null);
  if (db) {
    text = await readFile(db.proc, "utf8").catch(() => "");
    await db.close();
  }
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
  const g = new Guard();
  const top = await g.pin(path, "write", { follow: true, syscall: "chown" });
  try {
    const st = await top.stat();
    await at(path, "chown", () => chown(top.proc, uid, gid));
    affected.push({ path, uid: uid === -1 ? st.uid : uid, gid: gid === -1 ? st.gid : gid });
    if (recursive && st.isDirectory()) {
      await walk(
        g,
        top,
        "write",
        async (n) => {
          // A symlink's own owner: lchown of the name in its pinned directory (no lookup beyond it).
          await at(n.shown, "lchown", () =>
            n.st.isSymbolicLink() ? lchown(n.parent.at(n.name), uid, gid) : chown(n.self.proc, uid, gid),
          );
          affected.push({ path: n.shown, uid: uid === -1 ? n.st.uid : uid, gid: gid === -1 ? n.st.gid : gid });
        },
        "pre",
      );
    }
  } finally {
    await top.close();
  }
  return { affected, count: affected.length };
}

export async function deleteOp(path: string, recursive: boolean): Promise<{ deleted: string[]; count: number }> {
  const g = new Guard();
  const { dir, name } = await g.parent(path, "lstat");
  const deleted: string[] = [];
  try {
    const self = await g.pinIn(dir, name, "write", { follow: false, syscall: "lstat" }, path);
    try {
      const st = await self.stat();
      if (!st.isDirectory()) {
        await at(path, "unlink", () => unlink(dir.at(name)));
      } else {
        if (recursive) {
          await walk(
            g,
            self,
            "write",
            async (n) => {
              const isDir = n.st.isDirectory();
              await at(n.shown, isDir ? "rmdir" : "unlink", () =>
                isDir ? rmdir(n.parent.at(n.name)) : unlink(n.parent.at(n.name)),
              );
              deleted.push(n.shown);
            },
            "post",
          );
        }
        await at(path, "rmdir", () => rmdir(dir.at(name)));
      }
      deleted.push(path);
    } finally {
      await self.close();
    }
  } finally {
    await dir.close();
  }
  return { deleted, count: deleted.length };
}

/** rename(2) errors about the destination (it exists, is not empty, is a directory) name it. */
const aboutDest = (code: string) => ["EEXIST", "ENOTEMPTY", "EISDIR"].includes(code);

export async function renameOp(source: string, dest: string): Promise<{ source: string; dest: string }> {
  const g = new Guard();
  const from = await g.parent(source, "rename");
  try {
    const to = await g.parent(dest, "rename");
    try {
      await (await g.pinIn(from.dir, from.name, "write", { follow: false, syscall: "lstat" }, source)).close();
      try {
        await rename(from.dir.at(from.name), to.dir.at(to.name));
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? "";
        throw fsFailure(err, aboutDest(code) ? dest : source, "rename");
      }
    } finally {
      await to.dir.close();
    }
  } finally {
    await from.dir.close();
  }
  return { source, dest };
}

const O_WRITE = constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const MAX_HOPS = 40; // the kernel's own limit on symlinks in one lookup

/**
 * Opens `name` in the pinned directory `dir` for writing, creating it with `mode` when missing, as
 * open(O_WRONLY|O_CREAT) would, without truncating (the caller truncates once the file is checked).
 * A symlink there is followed the way the kernel would, one hop at a time, each hop's directory pinned
 * and checked. O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of hanging a worker thread.
 */
export async function openForWrite(
  g: Guard,
  dir0: Pinned,
  name0: string,
  shown: string,
  mode: number,
): Promise<FileHandle> {
  let dir = dir0;
  let name = name0;
  try {
    for (let hops = 0; ; hops++) {
      let fh: FileHandle;
      try {
        fh = await open(dir.at(name), O_WRITE, mode);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ELOOP" || hops >= MAX_HOPS) throw fsFailure(err, shown, "open");
        const target = await at(shown, "open", () => readlink(dir.at(name)));
        const next = await g.parent(isAbsolute(target) ? target : join(dir.real, target), "open", {
          rootCode: "EISDIR",
          shown,
        });
        if (dir !== dir0) await dir.close();
        dir = next.dir;
        name = next.name;
        continue;
      }
      try {
        await g.check(fh.fd, "write", shown);
      } catch (err) {
        await fh.close().catch(() => {});
        throw err;
      }
      return fh;
    }
  } finally {
    if (dir !== dir0) await dir.close();
  }
}

/** Opens `path` for reading, through the descriptor its check pinned (guard.ts); a directory is EISDIR. */
export async function openForRead(path: string): Promise<{ fh: FileHandle; size: number | undefined }> {
  const pinned = await new Guard().pin(path, "read", { follow: true });
  try {
    const st = await pinned.stat();
    if (st.isDirectory()) throw new FsOpError("EISDIR", path, `EISDIR: is a directory, read '${path}'`);
    // Opening a FIFO waits for a writer: a unit could hang the agent's threads with one.
    if (st.isFIFO()) throw new FsOpError("EINVAL", path, `EINVAL: cannot read a FIFO, '${path}'`);
    let fh: FileHandle;
    try {
      fh = await open(pinned.proc, "r");
    } catch (err) {
      throw fsFailure(err, path, "open");
    }
    return { fh, size: st.isFile() ? st.size : undefined };
  } finally {
    await pinned.close();
  }
}

const procFd = (fh: FileHandle) => `/proc/self/fd/${fh.fd}`;

export async function copyOp(
  source: string,
  destIn: string,
  recursive: boolean,
  preserveAttrs: boolean,
): Promise<{ copied: { source: string; dest: string }[]; count: number; totalBytes: number }> {
  const g = new Guard();
  const src = await g.pin(source, "read", { follow: false, syscall: "lstat" });
  const pinned: Pinned[] = [src];
  try {
    const st = await src.stat();
    if (st.isDirectory() && !recursive) {
      throw new FsOpError("EISDIR", source, `EISDIR: is a directory (copy it with recursive: true), '${source}'`);
    }
    // A symlink is copied as a link: its text is read by name in its pinned directory.
    const srcParent = st.isSymbolicLink() ? await g.parent(source, "readlink", { access: "read" }) : null;
    if (srcParent) pinned.push(srcParent.dir);
    // cp semantics: copying onto an existing directory puts the copy inside it.
    const into = await g.pin(destIn, "write", { follow: true, directory: true, syscall: "stat" }).catch((err) => {
      if (isReservedError(err)) throw err;
      return null;
    });
    let toDir: Pinned;
    let toName: string;
    let dest: string;
    if (into) {
      pinned.push(into);
      toDir = into;
      toName = basename(normalizeAbsolute(source));
      dest = join(destIn, toName);
      if (toName === "") throw new FsOpError("EINVAL", source, `EINVAL: cannot copy '${source}'`);
    } else {
      const p = await g.parent(destIn, "stat", { rootCode: "EEXIST" });
      pinned.push(p.dir);
      toDir = p.dir;
      toName = p.name;
      dest = destIn;
    }
    const destReal = join(toDir.real, toName);
    const below = (p: string, dir: string) => p === dir || p.startsWith(dir === "/" ? "/" : `${dir}/`);
    if (
      normalizeAbsolute(dest) === normalizeAbsolute(source) ||
      destReal === src.real ||
      (st.isDirectory() && (below(normalizeAbsolute(dest), normalizeAbsolute(source)) || below(destReal, src.real)))
    ) {
      throw new FsOpError("EINVAL", dest, `EINVAL: cannot copy '${source}' into itself ('${dest}')`);
    }
    const copied: { source: string; dest: string }[] = [];
    let totalBytes = 0;

    const attrs = async (to: string, shown: string, s: Stats, isLink: boolean) => {
      if (!preserveAttrs) return;
      if (!isLink) await at(shown, "chmod", () => chmod(to, s.mode & 0o7777));
      try {
        await lchown(to, s.uid, s.gid);
      } catch (err) {
        // like cp -p: a user cannot give files away; keeping the copier's ownership is not an error
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== "EPERM" && code !== "EINVAL") throw fsFailure(err, shown, "lchown");
      }
      await at(shown, "utimes", () => (isLink ? lutimes(to, s.atime, s.mtime) : utimes(to, s.atime, s.mtime)));
    };

    const copyOne = async (
      from: Pinned,
      fromParent: Pinned | null,
      fromName: string,
      dir: Pinned,
      name: string,
      toShown: string,
    ): Promise<void> => {
      if (isReservedPath(join(dir.real, name), "write")) throw reserved(toShown, "write");
      const s = await at(from.shown, "lstat", () => from.stat());
      if (s.isDirectory()) {
        try {
          await mkdir(dir.at(name), { mode: s.mode & 0o7777 });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw fsFailure(err, toShown, "mkdir");
        }
        const to = await g
          .pinIn(dir, name, "write", { follow: true, directory: true, syscall: "mkdir" }, toShown)
          .catch((err) => {
            if (err instanceof FsOpError && err.code === "ENOTDIR")
              throw fsFailure({ code: "EEXIST" }, toShown, "mkdir");
            throw err;
          });
        try {
          copied.push({ source: from.shown, dest: toShown });
          const names = await at(from.shown, "scandir", () => readdir(from.proc));
          for (const n of names.sort()) {
            const child = await g.pinIn(from, n, "read", { follow: false, syscall: "lstat" });
            try {
              await copyOne(child, from, n, to, n, join(toShown, n));
            } finally {
              await child.close();
            }
          }
          await attrs(to.proc, toShown, s, false);
        } finally {
          await to.close();
        }
      } else if (s.isSymbolicLink()) {
        if (!fromParent) throw new FsOpError("EINVAL", from.shown, `EINVAL: cannot read the link '${from.shown}'`);
        const target = await at(from.shown, "readlink", () => readlink(fromParent.at(fromName)));
        await at(toShown, "symlink", () => symlink(target, dir.at(name)));
        copied.push({ source: from.shown, dest: toShown });
        await attrs(dir.at(name), toShown, s, true);
      } else if (s.isFile()) {
        const out = await openForWrite(g, dir, name, toShown, s.mode & 0o777);
        try {
          // FICLONE: a reflink on btrfs (no data copied), a plain copy elsewhere. Both ends are the
          // checked descriptors (their /proc/self/fd links), so nothing is looked up by name again.
          await at(toShown, "copyfile", () => copyFile(from.proc, procFd(out), constants.COPYFILE_FICLONE));
          totalBytes += s.size;
          copied.push({ source: from.shown, dest: toShown });
          await attrs(procFd(out), toShown, s, false);
        } finally {
          await out.close().catch(() => {});
        }
      } else {
        throw new FsOpError("EINVAL", from.shown, `EINVAL: cannot copy a special file, '${from.shown}'`);
      }
    };
    await copyOne(src, srcParent?.dir ?? null, srcParent?.name ?? "", toDir, toName, dest);
    return { copied, count: copied.length, totalBytes };
  } finally {
    for (const p of pinned) await p.close();
  }
}
