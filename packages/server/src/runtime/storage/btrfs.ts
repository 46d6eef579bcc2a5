import { lstat, readFile, statfs } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadAddon } from "../../util/native-addon.js";
import { CommandError, run } from "../exec/host-command.js";

/** statfs f_type of btrfs. */
const BTRFS_SUPER_MAGIC = 0x9123683e;
/** Inode number of every subvolume's root directory (BTRFS_FIRST_FREE_OBJECTID). */
const SUBVOLUME_ROOT_INO = 256;

/** Creates an empty subvolume at `path` (its parent directory must exist, `path` must not). */
export async function createSubvolume(path: string): Promise<void> {
  await run("btrfs", ["subvolume", "create", resolve(path)]);
}

/**
 * Snapshots subvolume `src` to `dst` (O(1), copy-on-write). `dst` must not exist: btrfs would
 * otherwise create the snapshot *inside* it. Nested subvolumes of `src` appear as empty directories.
 */
export async function snapshot(
  src: string,
  dst: string,
  opts: { readonly?: boolean; qgroup?: string | undefined } = {},
): Promise<void> {
  const target = resolve(dst);
  if (
    await lstat(target).then(
      () => true,
      () => false,
    )
  ) {
    throw Object.assign(new Error(`snapshot target ${target} already exists`), { code: "EEXIST" });
  }
  const addon = snapshotAddon();
  if (addon) {
    await new Promise<void>((done, fail) =>
      addon.snapshot(
        resolve(src),
        dirname(target),
        basename(target),
        opts.readonly === true,
        opts.qgroup ?? "",
        (err, code) =>
          err === null
            ? done()
            : fail(Object.assign(new Error(`snapshot of ${resolve(src)} as ${target}: ${err}`), { code })),
      ),
    );
    return;
  }
  await run("btrfs", [
    "subvolume",
    "snapshot",
    ...(opts.readonly ? ["-r"] : []),
    ...(opts.qgroup ? ["-i", opts.qgroup] : []),
    resolve(src),
    target,
  ]);
}

interface SnapshotAddon {
  snapshot(
    src: string,
    dstDir: string,
    name: string,
    readonly: boolean,
    qgroup: string,
    cb: (err: string | null, code: string | null) => void,
  ): void;
}

const BTRFS_ADDON = fileURLToPath(new URL("../../native/ums-btrfs.node", import.meta.url));
let addon: SnapshotAddon | null | undefined;

/**
 * The snapshot ioctl made in this process, on a thread of its own (src/native/btrfs-snapshot.c:
 * `btrfs subvolume snapshot` run from here cost 6-9 ms, the ioctl 2-3); null without the addon (not
 * built), or with UMS_BTRFS_SNAPSHOT=cli, when the tool makes them.
 */
function snapshotAddon(): SnapshotAddon | null {
  if (addon === undefined)
    addon = process.env.UMS_BTRFS_SNAPSHOT === "cli" ? null : loadAddon<SnapshotAddon>(BTRFS_ADDON); // tried once
  return addon;
}

// Quota groups in "simple" mode (squota, kernel 6.7+): an extent is charged to the subvolume that
// wrote it, for as long as it exists. Full qgroups count shared extents by walking back-references,
// and the kernel gives up (marks them inconsistent, and stops enforcing limits until a rescan)
// whenever a subvolume sharing data with a snapshot is deleted: every unit delete and restore.
// btrfs-progs older than 6.7 cannot switch simple mode on, so its ioctl is issued directly.

/** BTRFS_IOC_QUOTA_CTL with a command: 2 disables quotas, 4 enables simple quotas. */
const QUOTA_CTL = `
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.ioctl(fd, 0xC0109428, struct.pack("QQ", int(sys.argv[2]), 0))
`;

/** The uuid of the btrfs filesystem holding `path` (its directory in /sys/fs/btrfs). */
export async function filesystemUuid(path: string): Promise<string> {
  const { stdout } = await run("btrfs", ["filesystem", "show", resolve(path)]);
  const uuid = /uuid: ([0-9a-f-]{36})/.exec(stdout)?.[1];
  if (!uuid) throw new Error(`btrfs filesystem show ${path} gave no uuid`);
  return uuid;
}

/** The filesystem's quota mode: `squota`, `qgroup` (full) or undefined (off). */
export async function quotaMode(path: string): Promise<string | undefined> {
  const uuid = await filesystemUuid(path);
  try {
    return (await readFile(`/sys/fs/btrfs/${uuid}/qgroups/mode`, "utf8")).trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Makes the quotas of the filesystem holding `path` simple ones: switched on if off, switched over
 * from full quota groups (their limits go). Safe when several processes do it at once.
 */
export async function enableSimpleQuota(path: string): Promise<void> {
  const ctl = (cmd: number) => run("python3", ["-c", QUOTA_CTL, resolve(path), String(cmd)]);
  for (let attempt = 0; attempt < 3; attempt++) {
    const mode = await quotaMode(path);
    if (mode === "squota") return;
    try {
      if (mode === "qgroup") await ctl(2);
      await ctl(4);
    } catch (err) {
      if (attempt === 2) throw err; // another process switching it at the same moment: look again
    }
  }
  if ((await quotaMode(path)) !== "squota") throw new Error(`could not switch on simple quotas on ${path}`);
}

/** The id of the subvolume whose root is `path`. */
export async function subvolumeId(path: string): Promise<number> {
  const { stdout } = await run("btrfs", ["inspect-internal", "rootid", resolve(path)]);
  const id = Number(stdout.trim());
  if (!Number.isInteger(id) || id <= 0) throw new Error(`no subvolume id for ${path}: ${stdout}`);
  return id;
}

/** Creates quota group `group` (`1/N`) on the filesystem at `pool`; one that exists is fine. */
export async function createQgroup(pool: string, group: string): Promise<void> {
  try {
    await run("btrfs", ["qgroup", "create", group, resolve(pool)]);
  } catch (err) {
    if (!(err instanceof CommandError && /File exists/.test(err.stderr))) throw err;
  }
}

/** Puts subvolume `subvolid`'s quota group (`0/id`) into `group`; one already in it is fine. */
export async function assignQgroup(pool: string, subvolid: number, group: string): Promise<void> {
  try {
    await run("btrfs", ["qgroup", "assign", "--no-rescan", `0/${subvolid}`, group, resolve(pool)]);
  } catch (err) {
    if (!(err instanceof CommandError && /File exists/.test(err.stderr))) throw err;
  }
}

/** Limits what quota group `group` may be charged (`none`: no limit); a write beyond gets EDQUOT. */
export async function limitQgroup(pool: string, group: string, bytes: number | "none"): Promise<void> {
  await run("btrfs", ["qgroup", "limit", String(bytes), group, resolve(pool)]);
}

/** Removes quota group `group`; false while subvolumes (or data they wrote that is still shared) are in it. */
export async function destroyQgroup(pool: string, group: string): Promise<boolean> {
  try {
    await run("btrfs", ["qgroup", "destroy", group, resolve(pool)]);
    return true;
  } catch {
    return false;
  }
}

export interface QgroupInfo {
  readonly id: string;
  /** Bytes charged to it. */
  readonly referenced: number;
  /** Its limit in bytes, if it has one. */
  readonly limit: number | undefined;
  readonly children: string[];
}

/** The pool's quota groups (`btrfs qgroup show -c -re`). */
export async function listQgroups(pool: string): Promise<QgroupInfo[]> {
  const { stdout } = await run("btrfs", ["qgroup", "show", "-c", "-re", "--raw", resolve(pool)]);
  const out: QgroupInfo[] = [];
  for (const line of stdout.split("\n")) {
    const m = /^(\d+\/\d+)\s+(\d+)\s+\d+\s+(\d+|none)\s+(?:\d+|none)\s+(\S+)/.exec(line);
    if (m)
      out.push({
        id: m[1] as string,
        referenced: Number(m[2]),
        limit: m[3] === "none" ? undefined : Number(m[3]),
        children: m[4] === "-" ? [] : (m[4] as string).split(","),
      });
  }
  return out;
}

/**
 * Takes a unit's level-1 group apart and removes it: its members leave it first (a subvolume being
 * deleted stays a member until the kernel has cleaned it up, which would keep the group). True when
 * the group is gone.
 */
export async function dropQgroup(pool: string, group: string): Promise<boolean> {
  const entry = (await listQgroups(pool)).find((g) => g.id === group);
  if (!entry) return true;
  for (const child of entry.children) {
    await run("btrfs", ["qgroup", "remove", "--no-rescan", child, group, resolve(pool)]).catch(() => {});
  }
  return destroyQgroup(pool, group);
}

/**
 * Removes the level-1 groups no unit uses any more: those whose members are all gone or stale
 * (deleted subvolumes) and charged nothing. For groups left by units deleted while a removal failed;
 * runs in the background at start. Returns how many went.
 */
export async function sweepQgroups(pool: string, stop: () => boolean = () => false): Promise<number> {
  const groups = await listQgroups(pool);
  const level0 = new Map(groups.filter((g) => g.id.startsWith("0/")).map((g) => [g.id, g]));
  const live = new Set((await listSubvolumes(pool)).map((s) => `0/${s.id}`));
  let dropped = 0;
  for (const g of groups) {
    if (stop()) break;
    if (!g.id.startsWith("1/")) continue;
    // A unit's group is named after its first rootfs: while that lives, the group is in use (or
    // about to be: made, its members not assigned yet).
    if (live.has(`0/${g.id.slice(2)}`)) continue;
    const idle = g.children.every((c) => !live.has(c) && (level0.get(c)?.referenced ?? 0) === 0);
    if (idle && (await dropQgroup(pool, g.id))) dropped++;
  }
  return dropped;
}

/** True when `path` is the root of a btrfs subvolume (no btrfs call: inode 256 on a btrfs filesystem). */
export async function isSubvolume(path: string): Promise<boolean> {
  try {
    const st = await lstat(path);
    if (!st.isDirectory() || st.ino !== SUBVOLUME_ROOT_INO) return false;
    return (await statfs(path)).type === BTRFS_SUPER_MAGIC;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "ENOTDIR") {
      return false;
    }
    throw err;
  }
}

export async function isReadonly(path: string): Promise<boolean> {
  const { stdout } = await run("btrfs", ["property", "get", "-ts", resolve(path), "ro"]);
  return stdout.trim() === "ro=true";
}

export async function setReadonly(path: string, readonly: boolean): Promise<void> {
  await run("btrfs", ["property", "set", "-ts", resolve(path), "ro", readonly ? "true" : "false"]);
}

/** Absolute paths of the subvolumes directly nested in subvolume `path`. */
export async function childSubvolumes(path: string): Promise<string[]> {
  const abs = resolve(path);
  // Both `subvolume show` and `list -o` name subvolumes relative to the filesystem's top level.
  const show = await run("btrfs", ["subvolume", "show", abs]);
  const own = (show.stdout.split("\n")[0] ?? "").trim();
  const list = await run("btrfs", ["subvolume", "list", "-o", abs]);
  const out: string[] = [];
  for (const entry of parseSubvolumeList(list.stdout)) {
    if (own === "/" || own === "<FS_TREE>") out.push(join(abs, entry.path));
    else if (entry.path.startsWith(`${own}/`)) out.push(join(abs, entry.path.slice(own.length + 1)));
    else throw new Error(`cannot place nested subvolume ${entry.path} under ${own}`);
  }
  return out;
}

/**
 * Deletes subvolume `path` and, first, every subvolume nested in it. A read-only subvolume that has
 * nested subvolumes is made writable first (its nested entries could not be unlinked otherwise); a
 * read-only subvolume without any is deleted as it is.
 */
export async function deleteSubvolume(path: string): Promise<void> {
  const abs = resolve(path);
  if (!(await isSubvolume(abs))) throw Object.assign(new Error(`${abs} is not a btrfs subvolume`), { code: "EINVAL" });
  // The common case in one btrfs call. Listing nested subvolumes scans every subvolume of the pool
  // (thousands on a busy host), so it is done only when the plain delete was refused (not empty).
  try {
    await run("btrfs", ["subvolume", "delete", abs]);
    return;
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    // Gone all the same (another delete of it finished first, or this one reported an error after
    // it had happened): what was asked is done. A clean-clone run failed here listing its children.
    if (!(await isSubvolume(abs))) return;
  }
  const children = await childSubvolumes(abs);
  if (children.length > 0 && (await isReadonly(abs))) await setReadonly(abs, false);
  for (const child of children) await deleteSubvolume(child);
  try {
    await run("btrfs", ["subvolume", "delete", abs]);
  } catch (err) {
    // Older kernels refuse to delete a read-only subvolume in some setups: retry writable.
    if (err instanceof CommandError && /read-only/i.test(err.stderr) && (await isReadonly(abs))) {
      await setReadonly(abs, false);
      await run("btrfs", ["subvolume", "delete", abs]);
    } else {
      throw err;
    }
  }
}

export interface SubvolumeInfo {
  id: number;
  /** The id of the subvolume that contains it (5 = the top level). */
  parentId: number;
  generation: number;
  uuid: string;
  /** The uuid of the subvolume it was snapshotted from, if any. */
  parentUuid: string | undefined;
  /** Path relative to the filesystem's top level. */
  path: string;
  /** Absolute path, for a pool mounted at its top level (as {@link openPool} does). */
  absPath: string;
  readonly: boolean;
}

/** Parses `btrfs subvolume list` output lines (`ID 256 gen 7 top level 5 [parent_uuid X uuid Y] path P`). */
export function parseSubvolumeList(text: string): Array<{
  id: number;
  generation: number;
  topLevel: number;
  uuid?: string;
  parentUuid?: string;
  path: string;
}> {
  const out = [];
  for (const line of text.split("\n")) {
    const m = /^ID (\d+) gen (\d+) top level (\d+)(?: parent_uuid (\S+))?(?:\s+uuid (\S+))? path (.*)$/.exec(
      line.trim(),
    );
    if (!m) continue;
    out.push({
      id: Number(m[1]),
      generation: Number(m[2]),
      topLevel: Number(m[3]),
      ...(m[4] !== undefined && m[4] !== "-" ? { parentUuid: m[4] } : {}),
      ...(m[5] !== undefined ? { uuid: m[5] } : {}),
      path: m[6] ?? "",
    });
  }
  return out;
}

/** Every subvolume of the pool mounted at `poolPath`, sorted by path. */
export async function listSubvolumes(poolPath: string): Promise<SubvolumeInfo[]> {
  const abs = resolve(poolPath);
  const [all, ro] = await Promise.all([
    run("btrfs", ["subvolume", "list", "-u", "-q", abs]),
    run("btrfs", ["subvolume", "list", "-r", abs]),
  ]);
  const readonlyIds = new Set(parseSubvolumeList(ro.stdout).map((e) => e.id));
  return parseSubvolumeList(all.stdout)
    .map((e) => ({
      id: e.id,
      parentId: e.topLevel,
      generation: e.generation,
      uuid: e.uuid ?? "",
      parentUuid: e.parentUuid,
      path: e.path,
      absPath: join(abs, e.path),
      readonly: readonlyIds.has(e.id),
    }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
