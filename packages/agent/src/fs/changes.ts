import { chmod, chown, lchown, readFile, rename, rmdir, unlink } from "node:fs/promises";
import { at } from "./common.js";
import { octal, walk } from "./entries.js";
import { FsOpError, fsFailure } from "./errors.js";
import { Guard } from "./guard.js";

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
