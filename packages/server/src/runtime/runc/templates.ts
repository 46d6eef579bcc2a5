import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { deleteSubvolume, isSubvolume, snapshot } from "../storage/btrfs.js";
import type { UnitPaths } from "./unit-paths.js";

// Issue #18: an organization template is a read-only subvolume of its own, `templates/<id>` in the
// pool, snapshotted from a unit's checkpoint. Snapshots share data but not lifetimes: deleting the
// source unit, its checkpoint or the template leaves every other one whole. No quota group holds a
// template (the data it keeps stays charged to whoever wrote it, simple quotas); a unit made from
// one gets its own group at its first boot (unit-disk.ts) and is charged only what it writes.

/** Where every template's subvolume lives. */
export function templatesDir(paths: UnitPaths): string {
  return join(paths.unitsDir, "..", "templates");
}

/** A template's subvolume. */
export function templatePath(paths: UnitPaths, templateId: string): string {
  return join(templatesDir(paths), templateId);
}

/** Snapshots a unit's checkpoint as template `templateId` (read-only). A leftover of the same id goes first. */
export async function publishTemplate(
  paths: UnitPaths,
  unitId: string,
  cpId: string,
  templateId: string,
): Promise<void> {
  const src = paths.checkpoint(unitId, cpId);
  if (!existsSync(src)) throw new Error(`checkpoint ${cpId} has no snapshot`);
  await mkdir(templatesDir(paths), { recursive: true });
  const dst = templatePath(paths, templateId);
  if (await isSubvolume(dst)) await deleteSubvolume(dst);
  await snapshot(src, dst, { readonly: true });
}

/** Deletes a template's subvolume (gone already: nothing to do). Units made from it keep their files. */
export async function deleteTemplate(paths: UnitPaths, templateId: string): Promise<void> {
  const path = templatePath(paths, templateId);
  if (await isSubvolume(path)) await deleteSubvolume(path);
}

/** A new unit's disk as a writable snapshot of a template (O(1)). */
export async function templateDisk(paths: UnitPaths, templateId: string, unitId: string): Promise<void> {
  const src = templatePath(paths, templateId);
  if (!existsSync(src)) throw new Error(`template ${templateId} has no snapshot`);
  const { disk, rootfs } = paths.unit(unitId);
  await mkdir(disk, { recursive: true });
  await snapshot(src, rootfs, { readonly: false });
}
