import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { deleteSubvolume, isReadonly, isSubvolume } from "../storage/btrfs.js";
import { withFileLock } from "../storage/lock.js";
import type { Pool } from "../storage/pool.js";
import { IMAGE_PACKAGES, type ImageVariant, imageNameProblem } from "./packages.js";
import type { UNIT_USER } from "./rootfs-config.js";

// Where images live in the pool (`<pool>/images/<name>`, a read-only subvolume, beside its
// manifest), whether a cached one can be used, and removing one.

/**
 * Version of what the build puts into an image beyond the Debian packages (the user, sudoers, the
 * placeholders, the uid shift). Bump it when that changes: cached images of an older version are
 * rebuilt.
 */
export const IMAGE_CONTENT_VERSION = 1;

export interface ImageManifest {
  name: string;
  variant: ImageVariant;
  contentVersion: number;
  suite: string;
  /** apt sources it was built from (also in the image's /etc/apt/sources.list). */
  sources: string[];
  /** Packages asked for on top of minbase. */
  packages: string[];
  /** Every installed package and its version. */
  installed: Record<string, string>;
  /** Host id of the image's root; the image's ids 0..uidRange-1 are stored as uidShift+id. */
  uidShift: number;
  uidRange: number;
  user: typeof UNIT_USER;
  builtAt: string;
  buildSeconds: number;
  /** Files, directories and links in the image. */
  entries: number;
  /** Apparent size of its regular files. */
  bytes: number;
}

export interface ImagePaths {
  /** The read-only image subvolume. */
  path: string;
  /** `<pool>/images/<name>.json`. */
  manifest: string;
  /** The writable subvolume a build works in. */
  building: string;
  /** TMPDIR of the build's mmdebstrap, removed with the build (a killed mmdebstrap leaves files there). */
  tmp: string;
  lock: string;
}

export function imagePaths(pool: Pick<Pool, "path"> | string, name: string): ImagePaths {
  const problem = imageNameProblem(name);
  if (problem) throw new Error(`image name '${name}' ${problem}`);
  const images = join(typeof pool === "string" ? pool : pool.path, "images");
  return {
    path: join(images, name),
    manifest: join(images, `${name}.json`),
    building: join(images, `.${name}.building`),
    tmp: join(images, `.${name}.tmp`),
    lock: join(images, `.${name}.lock`),
  };
}

export async function readImageManifest(
  pool: Pick<Pool, "path"> | string,
  name: string,
): Promise<ImageManifest | undefined> {
  try {
    return JSON.parse(await readFile(imagePaths(pool, name).manifest, "utf8")) as ImageManifest;
  } catch {
    return undefined;
  }
}

/**
 * Why a cached image cannot be used (undefined: it can): it must be a read-only subvolume with a
 * manifest of the current content version and the asked variant.
 */
export async function cacheProblem(
  paths: ImagePaths,
  variant: ImageVariant,
  wanted: readonly string[] = IMAGE_PACKAGES[variant],
): Promise<string | undefined> {
  if (!(await isSubvolume(paths.path))) return "not built yet";
  let manifest: ImageManifest;
  try {
    manifest = JSON.parse(await readFile(paths.manifest, "utf8"));
  } catch {
    return "no manifest (an interrupted build)";
  }
  if (manifest.contentVersion !== IMAGE_CONTENT_VERSION) {
    return `content version ${manifest.contentVersion}, current is ${IMAGE_CONTENT_VERSION}`;
  }
  if (manifest.variant !== variant) return `it is the ${manifest.variant} variant`;
  const had = manifest.packages ?? [];
  if (wanted.length !== had.length || wanted.some((p) => !had.includes(p))) {
    return "its package list changed since it was built";
  }
  if (!(await isReadonly(paths.path))) return "it is not read-only";
  return undefined;
}

/** The path of a valid cached image, or undefined. */
export async function cachedImage(
  pool: Pick<Pool, "path"> | string,
  name: string,
  variant: ImageVariant,
): Promise<string | undefined> {
  const paths = imagePaths(pool, name);
  return (await cacheProblem(paths, variant)) === undefined ? paths.path : undefined;
}

/** Removes an image (subvolume and manifest). Units already made from it are independent snapshots and stay. */
export async function deleteImage(pool: Pick<Pool, "path"> | string, name: string): Promise<void> {
  const paths = imagePaths(pool, name);
  await withFileLock(paths.lock, async () => {
    await rm(paths.manifest, { force: true });
    if (await isSubvolume(paths.path)) await deleteSubvolume(paths.path);
  });
}
