import { mkdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type { ImageConfig } from "@ums/protocol";
import { run } from "../exec/host-command.js";
import { imageConfigFor, missingForAgent } from "../image/image-config.js";
import { importUpload, prepareRoot } from "../image/oci/index.js";
import { createSubvolume, deleteSubvolume, isSubvolume, setReadonly } from "../storage/btrfs.js";
import { loopBackingDevice } from "../storage/mounts.js";
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
 * Imports the archive `body` streams (a `docker save` or OCI layout tar) as image `imageId`: a
 * read-only subvolume when it succeeds; nothing at all when it fails (ImageArchiveError for an
 * archive ums cannot use). The upload is written to `opts.uploadDir`, its layers applied as it
 * arrives where that works out (oci/speculation.ts).
 */
export async function importImage(
  paths: UnitPaths,
  imageId: string,
  body: Readable,
  opts: {
    /** Where the upload is written ({@link uploadDir}). */
    uploadDir: string;
    uidShift: number;
    uidRange: number;
    progress: (message: string) => void;
    signal?: AbortSignal;
  },
): Promise<ImportedImage> {
  await mkdir(importedDir(paths), { recursive: true });
  const root = importedPath(paths, imageId);
  const work = workPath(paths, imageId);
  const upload = join(opts.uploadDir, `${imageId}.tar`);
  await removeImported(paths, imageId);
  await createSubvolume(root);
  try {
    await mkdir(work, { mode: 0o700 });
    const done = await importUpload(body, root, {
      upload,
      workDir: work,
      uidShift: opts.uidShift,
      uidRange: opts.uidRange,
      // A wrong guess: a new subvolume (the old one's files go in the background), not 10,000 unlinks.
      reset: async () => {
        await deleteSubvolume(root);
        await createSubvolume(root);
        await prepareRoot(root, opts.uidShift);
      },
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
    await rm(upload, { force: true });
  }
}

/** Where an import puts the archive's files (beside the images, on the pool). */
function workPath(paths: UnitPaths, imageId: string): string {
  return join(importedDir(paths), `.${imageId}.work`);
}

/** The two places an import may write the archive it receives ({@link uploadDir}). */
function uploadDirs(paths: UnitPaths): { data: string; pool: string } {
  return { data: join(paths.dataDir, "uploads"), pool: join(importedDir(paths), ".uploads") };
}

/**
 * Where imports write the archives they receive (made if missing). When the pool is a loop file on
 * the data dir's filesystem (the default: `<dataDir>/pool.img`), `<dataDir>/uploads`: the bytes land
 * on that disk either way, and written there directly they skip btrfs and the loop device, which
 * cost about four times the CPU time (200 MiB: 0.55 s against 0.13 s on the test host), time the
 * import's layers then lack. Otherwise (the pool on a device of its own, which holds the space) in
 * the pool, `imported/.uploads`, whose files are neither compressed nor copy-on-write (`chattr +C
 * +m`, which new files take from their directory: an upload is written once, read back at once,
 * its digests checked by the import; compression and checksums of it keep nothing).
 */
export async function uploadDir(paths: UnitPaths): Promise<string> {
  const dirs = uploadDirs(paths);
  const [backing, data] = await Promise.all([loopBackingDevice(paths.unitsDir), stat(paths.dataDir)]);
  if (backing !== undefined && backing === data.dev) {
    await mkdir(dirs.data, { recursive: true, mode: 0o700 });
    return dirs.data;
  }
  await mkdir(importedDir(paths), { recursive: true });
  try {
    await mkdir(dirs.pool, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return dirs.pool;
    throw err;
  }
  await run("chattr", ["+C", "+m", dirs.pool]).catch(() => {}); // not btrfs: written as any file
  return dirs.pool;
}

/** Deletes an imported image's subvolume (gone already: nothing to do). Units made from it keep their files. */
export async function removeImported(paths: UnitPaths, imageId: string): Promise<void> {
  const path = importedPath(paths, imageId);
  if (await isSubvolume(path)) await deleteSubvolume(path);
  else await rm(path, { recursive: true, force: true });
  // What an import cut short by a crash left (the start's sweep removes its image this way).
  await rm(workPath(paths, imageId), { recursive: true, force: true });
  for (const dir of Object.values(uploadDirs(paths))) await rm(join(dir, `${imageId}.tar`), { force: true });
}
