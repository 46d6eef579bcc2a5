import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { ImageConfig } from "@ums/protocol";
import { imageConfigFor, missingForAgent } from "../image/image-config.js";
import { importOciArchive } from "../image/oci/index.js";
import { createSubvolume, deleteSubvolume, isSubvolume, setReadonly } from "../storage/btrfs.js";
import type { UnitPaths } from "./unit-paths.js";

// Issue #18: an organization's imported image is a read-only subvolume of its own, `imported/<id>`
// in the pool, written by the import (layers applied in order, owners shifted into the units' id
// range) before any unit ever ran on it. Units made from it get a writable snapshot, as from the
// base image; the image's config (env, user, working dir) lives in its row and reaches the agent at
// each boot.

/** Where every imported image's subvolume lives. */
export function importedDir(paths: UnitPaths): string {
  return join(paths.unitsDir, "..", "imported");
}

export function importedPath(paths: UnitPaths, imageId: string): string {
  return join(importedDir(paths), imageId);
}

export interface ImportedImage {
  readonly source: "docker-save" | "oci-layout";
  readonly config: ImageConfig;
  readonly bytes: number;
  readonly layers: number;
  /** Entries of the archive left out (device files, extended attributes), with why. */
  readonly skipped: readonly { path: string; reason: string }[];
}

/**
 * Imports `archive` (a file the caller owns) as image `imageId`: a read-only subvolume when it
 * succeeds; nothing at all when it fails (ImageArchiveError for an archive ums cannot use).
 */
export async function importImage(
  paths: UnitPaths,
  imageId: string,
  archive: string,
  opts: { uidShift: number; uidRange: number; progress: (message: string) => void; signal?: AbortSignal },
): Promise<ImportedImage> {
  await mkdir(importedDir(paths), { recursive: true });
  const root = importedPath(paths, imageId);
  const work = join(importedDir(paths), `.${imageId}.work`);
  await removeImported(paths, imageId);
  await createSubvolume(root);
  try {
    await mkdir(work, { mode: 0o700 });
    const done = await importOciArchive(archive, root, {
      workDir: work,
      uidShift: opts.uidShift,
      uidRange: opts.uidRange,
      // From the first layer on: an archive refused while it is read is a plain 400 (images/routes.ts).
      onProgress: (p) => {
        if (p.layers > 0) opts.progress(p.message);
      },
      ...(opts.signal && { signal: opts.signal }),
    });
    await missingForAgent(root);
    const config = await imageConfigFor(root, done.config);
    await setReadonly(root, true);
    return {
      source: done.format,
      config,
      bytes: done.stats.bytes,
      layers: done.layers,
      skipped: done.stats.skipped,
    };
  } catch (err) {
    await removeImported(paths, imageId).catch(() => {});
    throw err;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Where an import puts the archive it receives: beside the images, on the pool (no size limit of /tmp). */
export async function uploadPath(paths: UnitPaths, imageId: string): Promise<string> {
  await mkdir(importedDir(paths), { recursive: true });
  return join(importedDir(paths), `.${imageId}.tar`);
}

/** Deletes an imported image's subvolume (gone already: nothing to do). Units made from it keep their files. */
export async function removeImported(paths: UnitPaths, imageId: string): Promise<void> {
  const path = importedPath(paths, imageId);
  if (await isSubvolume(path)) await deleteSubvolume(path);
  else await rm(path, { recursive: true, force: true });
}
