import { existsSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { deleteSubvolume, snapshot } from "../storage/btrfs.js";
import type { UnitPaths } from "./unit-paths.js";

/** A unit's disk: a writable snapshot of the base image (O(1), it costs no process). Idempotent: a unit that has its disk keeps it. */
export async function createDisk(paths: UnitPaths, imagePath: string, id: string): Promise<void> {
  if (existsSync(paths.rootfs(id))) return;
  await mkdir(paths.unitDir(id), { recursive: true });
  await snapshot(imagePath, paths.rootfs(id), { readonly: false });
}

/** A new unit's disk as a writable snapshot of another unit's checkpoint. */
export async function forkDisk(paths: UnitPaths, srcId: string, cpId: string, newId: string): Promise<void> {
  await mkdir(paths.unitDir(newId), { recursive: true });
  await snapshot(paths.checkpoint(srcId, cpId), paths.rootfs(newId), { readonly: false });
}

/** Deletes a stopped unit's disk (its checkpoints, the rootfs and a restore's leftovers) and its run dir. */
export async function destroyDisk(paths: UnitPaths, id: string): Promise<void> {
  const dir = paths.unitDir(id);
  let cps: string[] = [];
  try {
    cps = await readdir(paths.checkpointsDir(id));
  } catch {}
  for (const sub of [...cps.map((cp) => join("checkpoints", cp)), "rootfs", "rootfs.old", "rootfs.new"]) {
    if (existsSync(join(dir, sub))) await deleteSubvolume(join(dir, sub));
  }
  await rm(dir, { recursive: true, force: true });
  await rm(paths.runDir(id), { recursive: true, force: true });
}
