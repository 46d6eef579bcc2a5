import { constants, type Stats } from "node:fs";
import {
  chmod,
  copyFile,
  type FileHandle,
  lchown,
  lutimes,
  mkdir,
  open,
  readdir,
  readlink,
  symlink,
  utimes,
} from "node:fs/promises";
import { basename, isAbsolute, join } from "node:path";
import { isReservedPath, normalizeAbsolute } from "@ums/protocol/fs-reserved";
import { at, isReservedError } from "./common.js";
import { FsOpError, fsFailure } from "./errors.js";
import { Guard, type Pinned, reserved } from "./guard.js";

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
  const t = await resolveForWrite(g, dir0, name0, shown, mode);
  if (t.dir !== dir0) await t.dir.close();
  // With a mode the file is created when missing: a null handle cannot come back (kept for the type).
  if (!t.fh) throw fsFailure({ code: "ENOENT" }, shown, "open");
  return t.fh;
}

/** Where a write lands: the directory and name a symlink chain ends at, and the file there if any. */
export interface WriteTarget {
  /** The directory that holds `name`: the caller's, or one a symlink led to (the caller closes that one). */
  readonly dir: Pinned;
  readonly name: string;
  /** The existing object opened for writing and checked; null when there is none (and `mode` was null). */
  readonly fh: FileHandle | null;
}

/**
 * Follows `name` in `dir0` to the object a write of it reaches, as openForWrite does: with `mode`, a
 * missing file is created (open O_CREAT); with null, nothing is created and `fh` is null then, the
 * directory and name being where the file would be (a dangling symlink's target). Every hop's
 * directory is pinned and checked; the last component is never followed by the open (O_NOFOLLOW).
 */
export async function resolveForWrite(
  g: Guard,
  dir0: Pinned,
  name0: string,
  shown: string,
  mode: number | null,
): Promise<WriteTarget> {
  let dir = dir0;
  let name = name0;
  let done = false;
  try {
    for (let hops = 0; ; hops++) {
      let fh: FileHandle;
      try {
        fh =
          mode === null
            ? await open(dir.at(name), O_WRITE & ~constants.O_CREAT)
            : await open(dir.at(name), O_WRITE, mode);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOENT" && mode === null) {
          done = true;
          return { dir, name, fh: null };
        }
        if (code !== "ELOOP" || hops >= MAX_HOPS) throw fsFailure(err, shown, "open");
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
      done = true;
      return { dir, name, fh };
    }
  } finally {
    if (!done && dir !== dir0) await dir.close();
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
    // Not waited for (the read goes through `fh`); `close` takes care of its own failure.
    void pinned.close();
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
