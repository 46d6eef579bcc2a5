import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { lstat, rename } from "node:fs/promises";
import { basename, join } from "node:path";
import { createInterface } from "node:readline";
import { failpoint } from "../../failpoints/failpoints.js";
import { run } from "../exec/host-command.js";
import { deleteSubvolume, snapshot } from "../storage/btrfs.js";
import { writeJournal } from "./checkpoint-journal.js";
import { importedPath } from "./imported-images.js";
import { finishEarlierReplace, rollBackReplace } from "./restore.js";
import { unitQgroup } from "./unit-disk.js";
import type { UnitPaths } from "./unit-paths.js";

// Issue #18: `upgrade` moves a unit made from an organization image to a newer build of it. The
// rule (docs/IMAGES.md "Upgrading a unit"):
//
// - The system files are these trees: SYSTEM_TREES. Everything else (home directories, /root,
//   /opt, /srv, /var but its package database, /tmp) is the unit's own and is kept as it is.
// - The move is safe only when the unit changed nothing in the system trees since it was made from
//   its build: then the newer build's trees replace them and nothing of the unit's is lost. What
//   the unit changed is asked of btrfs itself: `btrfs send --no-data -p <build> <unit snapshot>`
//   is the kernel's list of differences between the two (the unit's disk is a snapshot of the
//   build), read with `btrfs receive --dump`. Times (utimes: a read moves atime) are not changes;
//   nor are the files the runtime itself makes at every boot (RUNTIME_FILES).
// - A unit that installed packages, edited /etc or added users is refused, with the paths: the
//   upgrade would drop that work. Rebuilding the image with it, or a new unit, is the way there.
//
// The host never follows a link the unit could have made: the comparison is the kernel's, on
// read-only snapshots; the trees are replaced in a fresh snapshot that no process of the unit can
// reach (the unit is stopped), by `rm` and `cp -a` (neither follows a link), after checking that
// every directory on the way to a nested tree is a directory, not a link.

/** The trees an upgrade replaces (relative to the root). */
export const SYSTEM_TREES = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "var/lib/dpkg"] as const;

/**
 * Made at every boot, not by the unit: /etc/hostname and /etc/hosts by its agent (identity.ts);
 * /etc/ld.so.preload by runc, as the mount point of the host's read-only file bound there.
 */
const RUNTIME_FILES = new Set(["etc/hostname", "etc/hosts", "etc/ld.so.preload"]);

/** btrfs send's temporary names for new inodes (`o<ino>-<gen>-<seq>` at the top): renamed in the stream. */
const SEND_TMP = /^o\d+-\d+-\d+$/;

/** Undoes btrfs-progs' path escaping (`\` before a space or a special character, `\ooo` octal). */
function unescapePath(p: string): string {
  return p.replace(/\\([0-7]{3}|.)/g, (_, c: string) =>
    c.length === 3 ? String.fromCharCode(Number.parseInt(c, 8)) : c,
  );
}

/** Whether `path` is in a system tree, or is a directory on the way to one (replacing it moves the tree). */
export function touchesSystem(path: string): boolean {
  if (RUNTIME_FILES.has(path)) return false;
  return SYSTEM_TREES.some((t) => path === t || path.startsWith(`${t}/`) || t.startsWith(`${path}/`));
}

/**
 * The paths in system trees that one line of `btrfs receive --dump` changes (relative, no `./`);
 * `top` is the snapshot's name, which every path of the dump starts with.
 */
export function systemChanges(line: string, top: string): string[] {
  const m = /^(\S+)\s+((?:\\.|\S)+)(?:\s+(.*))?$/.exec(line);
  if (!m) return [];
  const [, cmd, rawPath, args = ""] = m as unknown as [string, string, string, string | undefined];
  if (cmd === "snapshot" || cmd === "subvol" || cmd === "utimes") return [];
  const rel = (p: string): string | undefined => {
    const u = unescapePath(p);
    const prefix = `./${top}/`;
    if (!u.startsWith(prefix)) return undefined;
    const r = u.slice(prefix.length);
    return SEND_TMP.test(r) ? undefined : r;
  };
  const paths = [rel(rawPath)];
  // rename: the source and the destination both change; link: only the new name does (a hard link
  // to a system file leaves the file as it was).
  const dest = /(?:^|\s)dest=((?:\\.|\S)+)/.exec(args);
  if (cmd === "rename" && dest?.[1]) paths.push(rel(dest[1]));
  return paths.filter((p): p is string => p !== undefined && touchesSystem(p));
}

/**
 * The system paths `snap` (a read-only snapshot of a unit's disk) changed compared with `build`
 * (the read-only build it was made from): at most `limit` of them, and how many there are.
 */
export async function changedSystemPaths(
  build: string,
  snap: string,
  limit = 20,
): Promise<{ paths: string[]; count: number }> {
  const send = spawn("btrfs", ["send", "--no-data", "-q", "-p", build, snap], { stdio: ["ignore", "pipe", "pipe"] });
  const dump = spawn("btrfs", ["receive", "--dump"], { stdio: ["pipe", "pipe", "pipe"] });
  send.stdout.pipe(dump.stdin);
  let errors = "";
  send.stderr.on("data", (d: Buffer) => {
    errors += d.toString();
  });
  dump.stderr.on("data", (d: Buffer) => {
    errors += d.toString();
  });
  dump.stdin.on("error", () => {}); // the dump ended first: its exit code says why
  const exited = (p: ReturnType<typeof spawn>) =>
    new Promise<number>((resolve, reject) => {
      p.once("error", reject);
      p.once("close", (code) => resolve(code ?? 1));
    });
  const codes = Promise.all([exited(send), exited(dump)]);
  const seen = new Set<string>();
  const top = basename(snap);
  for await (const line of createInterface({ input: dump.stdout, crlfDelay: Number.POSITIVE_INFINITY })) {
    for (const p of systemChanges(line, top)) seen.add(p);
  }
  const [a, b] = await codes;
  if (a !== 0 || b !== 0) throw new Error(`comparing the unit with its image failed: ${errors.trim().slice(0, 500)}`);
  return { paths: [...seen].sort().slice(0, limit), count: seen.size };
}

/**
 * What keeps `root` from having its system trees replaced: a directory on the way to a nested tree
 * (var, var/lib) that is a link or not a directory. Read only; `root` is a snapshot no one writes.
 */
export async function layoutProblems(root: string, what: string): Promise<string[]> {
  const problems: string[] = [];
  for (const tree of SYSTEM_TREES) {
    const parts = tree.split("/");
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      const st = await lstat(join(root, dir)).catch(() => undefined);
      if (st && !st.isDirectory()) {
        problems.push(`/${dir} in ${what} is ${st.isSymbolicLink() ? "a link" : "not a directory"}`);
        break;
      }
      if (!st) break; // nothing below it either: the tree is simply absent
    }
  }
  return [...new Set(problems)];
}

/**
 * A read-only snapshot of the unit's disk as it is now (`rootfs.check`, replaced if a crash left
 * one) for `changedSystemPaths` while the unit may run; the caller deletes it.
 */
export async function snapshotForCheck(paths: UnitPaths, id: string): Promise<string> {
  const { disk, rootfs } = paths.unit(id);
  const at = join(disk, "rootfs.check");
  if (existsSync(at)) await deleteSubvolume(at);
  await snapshot(rootfs, at, { readonly: true });
  return at;
}

/**
 * Replaces a stopped unit's disk with checkpoint `cpId` (its state when it was stopped for the
 * upgrade) whose system trees are build `imageId`'s. Journaled like a restore (restore.ts): the new
 * disk is made aside as rootfs.new, the journal says `replaced` only once it is at rootfs, and a
 * crash before that is rolled back at the next start, one after it rolled forward (with the image).
 */
export async function upgradeDisk(
  paths: UnitPaths,
  id: string,
  cpId: string,
  image: { id: string; version: string },
): Promise<void> {
  const src = paths.checkpoint(id, cpId);
  const build = importedPath(paths, image.id);
  if (!existsSync(src)) throw new Error(`checkpoint ${cpId} has no snapshot`);
  if (!existsSync(build)) throw new Error(`image build ${image.version} has no files`);
  const { disk: dir, rootfs } = paths.unit(id);
  const fresh = join(dir, "rootfs.new");
  await finishEarlierReplace(paths, id);
  await writeJournal(dir, { checkpoint: cpId, phase: "replacing", image });
  try {
    await makeUpgraded(paths, id, src, build, fresh);
    failpoint("upgrade.new-made");
    if (existsSync(rootfs)) await rename(rootfs, join(dir, "rootfs.old"));
    await rename(fresh, rootfs);
    failpoint("upgrade.new-moved");
  } catch (err) {
    await rollBackReplace(paths, id);
    throw err;
  }
  await writeJournal(dir, { checkpoint: cpId, phase: "replaced", image });
}

/** rootfs.new: the checkpoint's files with the build's system trees. */
async function makeUpgraded(paths: UnitPaths, id: string, src: string, build: string, fresh: string): Promise<void> {
  if (existsSync(fresh)) await deleteSubvolume(fresh);
  await snapshot(src, fresh, { readonly: false, qgroup: unitQgroup(paths, id) });
  const problems = [...(await layoutProblems(fresh, "the unit")), ...(await layoutProblems(build, "the image"))];
  if (problems.length > 0) throw new Error(`the system trees cannot be replaced: ${problems.join("; ")}`);
  for (const tree of SYSTEM_TREES) {
    const at = join(fresh, tree);
    const from = join(build, tree);
    const here = await lstat(at).catch(() => undefined);
    if (here) await run("rm", ["-rf", "--one-file-system", "--", at]);
    if (await lstat(from).catch(() => undefined)) {
      // The parent of a nested tree is a directory in both (layoutProblems); make it where the unit had none.
      await run("mkdir", ["-p", "--", join(at, "..")]);
      await run("cp", ["-a", "--reflink=always", "--", from, at]);
    }
  }
}
