import type { Stats } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { at, openBelow } from "./common.js";
import { fsFailure } from "./errors.js";
import { Guard, type Pinned } from "./guard.js";

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
export interface Node {
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
export async function walk(
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
