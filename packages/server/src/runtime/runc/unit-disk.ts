import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { failpoint } from "../../failpoints/failpoints.js";
import { createMarkerDurably } from "../../util/durable-file.js";
import {
  assignQgroup,
  createQgroup,
  deleteSubvolume,
  dropQgroup,
  limitQgroup,
  snapshot,
  subvolumeId,
} from "../storage/btrfs.js";
import type { UnitPaths } from "./unit-paths.js";

/**
 * A unit being deleted: `<disk>/deleting.<runtime id>`, made (and synced) before anything of the unit
 * goes, and removed with the directory only once the caller has dropped the unit's record
 * (`forgetDisk`). A crash in between leaves the record with the tombstone, never a record without a
 * disk that would boot again with fresh files: the next start finishes the delete (`deletingDisks`).
 * Its name holds the deleting server's runtime id: servers that share a pool finish only their own
 * deletes (a server starting while another deletes a unit must not take that delete over). It is
 * empty, so making it costs metadata only: a delete is what frees a full pool, and btrfs reserves a
 * data block for any write, which a full pool refuses (ENOSPC).
 */
const TOMBSTONE = "deleting.";
const tombstone = (paths: UnitPaths) => `${TOMBSTONE}${paths.rid}`;
const isTombstone = (name: string) => name.startsWith(TOMBSTONE);

/** A unit's disk: a writable snapshot of the base image (O(1), it costs no process). Idempotent: a unit that has its disk keeps it. */
export async function createDisk(paths: UnitPaths, imagePath: string, id: string): Promise<void> {
  const { disk, rootfs } = paths.unit(id);
  if (existsSync(rootfs)) return;
  // A unit whose delete was interrupted is not given fresh files: the next start finishes the delete.
  if (existsSync(disk) && readdirSync(disk).some(isTombstone)) throw new Error(`unit ${id} is being deleted`);
  // Its files are aside in an interrupted restore (restore.ts): never fresh files in their place.
  if (existsSync(join(disk, "rootfs.old"))) {
    throw new Error(
      `unit ${id} has an interrupted restore (its files are in rootfs.old); restart the server to settle it`,
    );
  }
  await mkdir(disk, { recursive: true });
  await snapshot(imagePath, rootfs, { readonly: false });
}

// A unit's disk size (issue #20) is the limit of its own level-1 quota group, `1/<id of its first
// rootfs>`, named in `<disk>/qgroup` (a host-owned file). The group is made at the unit's first
// boot (limitDisk), with the rootfs and checkpoints it has then, so a unit that never runs costs
// none; later subvolumes (checkpoints, a restore's rootfs) join it through `snapshot -i`. With
// simple quotas (btrfs.ts) the group is charged what the unit wrote, its image's files excluded,
// for as long as the data exists: deleting a file that a checkpoint keeps frees nothing, and a
// restore starts no new account. A fork's group is its own and is charged only what the fork writes.

/** The unit's quota group, if it has one. */
export function unitQgroup(paths: UnitPaths, id: string): string | undefined {
  try {
    const text = readFileSync(join(paths.unit(id).disk, "qgroup"), "utf8").trim();
    return /^1\/[0-9]+$/.test(text) ? text : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Gives the unit its quota group (`pool`: the pool's path when quotas are on), with its rootfs and
 * checkpoints in it. Idempotent; a unit made before disk limits gets one at its next boot.
 */
export async function ensureUnitQgroup(
  paths: UnitPaths,
  id: string,
  pool: string | undefined,
): Promise<string | undefined> {
  if (!pool) return undefined;
  const known = unitQgroup(paths, id);
  if (known) return known;
  const { disk, rootfs, checkpoints } = paths.unit(id);
  if (!existsSync(rootfs)) return undefined;
  const rootfsId = await subvolumeId(rootfs);
  const group = `1/${rootfsId}`;
  await createQgroup(pool, group);
  await assignQgroup(pool, rootfsId, group);
  for (const cp of existsSync(checkpoints) ? await readdir(checkpoints) : []) {
    await assignQgroup(pool, await subvolumeId(join(checkpoints, cp)), group);
  }
  const tmp = join(disk, "qgroup.tmp");
  await writeFile(tmp, `${group}\n`, { mode: 0o600 });
  await rename(tmp, join(disk, "qgroup"));
  return group;
}

/**
 * Sets the unit's disk size, live: its next write beyond it fails with EDQUOT. False when the unit
 * has no disk (yet: its first boot sets it) or quotas are off.
 */
export async function limitDisk(
  paths: UnitPaths,
  id: string,
  pool: string | undefined,
  bytes: number,
): Promise<boolean> {
  try {
    const group = await ensureUnitQgroup(paths, id, pool);
    if (!group || !pool) return false;
    await limitQgroup(pool, group, bytes);
    return true;
  } catch (err) {
    if (!existsSync(paths.unit(id).disk)) return false; // deleted meanwhile
    throw err;
  }
}

/** A new unit's disk as a writable snapshot of another unit's checkpoint. */
export async function forkDisk(paths: UnitPaths, srcId: string, cpId: string, newId: string): Promise<void> {
  const { disk, rootfs } = paths.unit(newId);
  await mkdir(disk, { recursive: true });
  await snapshot(paths.checkpoint(srcId, cpId), rootfs, { readonly: false });
}

/** Deletes a stopped unit's disk (its checkpoints, the rootfs and a restore's leftovers) and its run dir. */
export async function destroyDisk(paths: UnitPaths, id: string, pool: string | undefined): Promise<void> {
  const { disk: dir, checkpoints, run } = paths.unit(id);
  const group = unitQgroup(paths, id);
  await mkdir(dir, { recursive: true });
  await createMarkerDurably(join(dir, tombstone(paths)));
  failpoint("unit-delete.tombstoned");
  let cps: string[] = [];
  try {
    cps = await readdir(checkpoints);
  } catch {}
  for (const sub of [
    ...cps.map((cp) => join("checkpoints", cp)),
    "rootfs",
    "rootfs.old",
    "rootfs.new",
    "rootfs.check",
  ]) {
    if (existsSync(join(dir, sub))) await deleteSubvolume(join(dir, sub));
  }
  for (const name of await readdir(dir)) {
    if (!isTombstone(name)) await rm(join(dir, name), { recursive: true, force: true });
  }
  await rm(run, { recursive: true, force: true });
  // The group goes with it (a fork still sharing its data keeps that charged to a stale member,
  // which is then no one's: nothing more). A removal that fails is the start's sweep's.
  if (group && pool) await dropQgroup(pool, group).catch(() => false);
}

/**
 * Issue #15: a unit that moved to another node: `<disk>/retired.<runtime id>` says this server keeps
 * only a snapshot of it (the parent of a move back), swept once the unit or that checkpoint is gone.
 */
const RETIRED = "retired.";
const retiredMark = (paths: UnitPaths) => `${RETIRED}${paths.rid}`;

/**
 * Removes a stopped unit's disk but the snapshots of checkpoints `keep` (the rootfs, a restore's
 * leftovers, its other checkpoints, its run dir and quota group) and marks what stays as retired.
 * The mark is written first: a crash midway leaves a retired unit for the sweep, never a unit
 * this server would take for its own.
 */
export async function retireDisk(
  paths: UnitPaths,
  id: string,
  keep: readonly string[],
  pool: string | undefined,
): Promise<void> {
  const { disk: dir, checkpoints, run } = paths.unit(id);
  const group = unitQgroup(paths, id);
  await markRetired(paths, id);
  let cps: string[] = [];
  try {
    cps = await readdir(checkpoints);
  } catch {}
  for (const sub of [
    ...cps.filter((cp) => !keep.includes(cp)).map((cp) => join("checkpoints", cp)),
    "rootfs",
    "rootfs.old",
    "rootfs.new",
    "rootfs.check",
  ]) {
    if (existsSync(join(dir, sub))) await deleteSubvolume(join(dir, sub));
  }
  for (const name of await readdir(dir)) {
    if (name !== "checkpoints" && name !== retiredMark(paths) && !isTombstone(name)) {
      await rm(join(dir, name), { recursive: true, force: true });
    }
  }
  await rm(run, { recursive: true, force: true });
  if (group && pool) await dropQgroup(pool, group).catch(() => false);
}

/** Marks the unit retired (retireDisk's first step), durably; idempotent. */
export async function markRetired(paths: UnitPaths, id: string): Promise<void> {
  const { disk: dir } = paths.unit(id);
  if (existsSync(join(dir, retiredMark(paths)))) return;
  await mkdir(dir, { recursive: true });
  await createMarkerDurably(join(dir, retiredMark(paths)));
}

/** The unit is this server's again (it moved back): its kept snapshot is one of its checkpoints. */
export async function unretireDisk(paths: UnitPaths, id: string): Promise<void> {
  await rm(join(paths.unit(id).disk, retiredMark(paths)), { force: true });
}

/** Whether this server keeps the unit retired (retireDisk). */
export function isRetiredDisk(paths: UnitPaths, id: string): boolean {
  return existsSync(join(paths.unit(id).disk, retiredMark(paths)));
}

/** This server's retired units (retireDisk). */
export async function retiredDisks(paths: UnitPaths): Promise<string[]> {
  let ids: string[] = [];
  try {
    ids = await readdir(paths.unitsDir);
  } catch {}
  return ids.filter((id) => existsSync(join(paths.unit(id).disk, retiredMark(paths))));
}

/** Removes a destroyed unit's tombstone: its record is gone. */
export async function forgetDisk(paths: UnitPaths, id: string): Promise<void> {
  await rm(paths.unit(id).disk, { recursive: true, force: true });
}

/** This server's units whose delete a crash interrupted (their tombstone names this server). */
export async function deletingDisks(paths: UnitPaths): Promise<string[]> {
  let ids: string[] = [];
  try {
    ids = await readdir(paths.unitsDir);
  } catch {}
  return ids.filter((id) => existsSync(join(paths.unit(id).disk, tombstone(paths))));
}
