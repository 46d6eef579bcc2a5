import { existsSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { deleteSubvolume, snapshot } from "../storage/btrfs.js";
import type { UnitPaths } from "./unit-paths.js";

/** A unit's disk: a writable snapshot of the base image (O(1), it costs no process). Idempotent: a unit that has its disk keeps it. */
export async function createDisk(paths: UnitPaths, imagePath: string, id: string): Promise<void> {
  const { disk, rootfs } = paths.unit(id);
  if (existsSync(rootfs)) return;
  await mkdir(disk, { recursive: true });
  await snapshot(imagePath, rootfs, { readonly: false });
}

/** A new unit's disk as a writable snapshot of another unit's checkpoint. */
export async function forkDisk(paths: UnitPaths, srcId: string, cpId: string, newId: string): Promise<void> {
  const { disk, rootfs } = paths.unit(newId);
  await mkdir(disk, { recursive: true });
  await snapshot(paths.checkpoint(srcId, cpId), rootfs, { readonly: false });
}

/** Deletes a stopped unit's disk (its checkpoints, the rootfs and a restore's leftovers) and its run dir. */
export async function destroyDisk(paths: UnitPaths, id: string): Promise<void> {
  const { disk: dir, checkpoints, run } = paths.unit(id);
  let cps: string[] = [];
  try {
    cps = await readdir(checkpoints);
  } catch {}
  for (const sub of [...cps.map((cp) => join("checkpoints", cp)), "rootfs", "rootfs.old", "rootfs.new"]) {
    if (existsSync(join(dir, sub))) await deleteSubvolume(join(dir, sub));
  }
  await rm(dir, { recursive: true, force: true });
  await rm(run, { recursive: true, force: true });
}
