import { constants } from "node:fs";
import { lchown, lstat, mkdir, open, readdir, readFile, rm, utimes } from "node:fs/promises";
import { join } from "node:path";
import type { ImageConfig, ImageRecipe } from "@ums/protocol";
import { buildImage } from "../image/build.js";
import { imageConfigFor } from "../image/image-config.js";
import { imagePaths } from "../image/image-store.js";
import { entryComponents, ImageArchiveError, resolveEntry } from "../image/oci/index.js";
import { IMAGE_PACKAGES, type ImageVariant } from "../image/packages.js";
import { fileBytes, fileMode, fileOwner, packageImageName } from "../image/recipe.js";
import { deleteSubvolume, isSubvolume, setReadonly, snapshot } from "../storage/btrfs.js";
import { withFileLock } from "../storage/lock.js";
import { importedDir, importedPath, removeImported } from "./imported-images.js";
import type { UnitPaths } from "./unit-paths.js";

// Issue #18: an image built from a recipe. Its Debian packages are installed by the host's own
// image build (mmdebstrap: Debian's packages, their scripts run in a chroot of the new tree) into an
// image cached by the package list; the recipe's files are written by the host into a snapshot of
// that image no unit has run on yet, each path resolved inside it; its steps, which are the user's
// code, run as root in a unit (nodes/local/image-build.ts), isolated like any, whose disk then
// becomes the image.

export interface RecipeContext {
  readonly paths: UnitPaths;
  readonly poolDir: string;
  /** The base image (its manifest beside it: `<path>.json`). */
  readonly imagePath: string;
  readonly idShift: number;
  readonly idCount: number;
}

/** The image a recipe starts from: the base image, or a build of it with the recipe's packages too. */
async function recipeBase(
  ctx: RecipeContext,
  packages: readonly string[],
  progress: (message: string) => void,
  signal?: AbortSignal,
): Promise<string> {
  if (packages.length === 0) return ctx.imagePath;
  const manifest = JSON.parse(await readFile(`${ctx.imagePath}.json`, "utf8")) as {
    variant: ImageVariant;
    packages?: string[];
  };
  const all = [...new Set([...(manifest.packages ?? IMAGE_PACKAGES[manifest.variant]), ...packages])];
  let last = -1;
  const built = await buildImage({
    pool: ctx.poolDir,
    name: packageImageName(all),
    variant: manifest.variant,
    packages: all,
    ...(signal && { signal }),
    onProgress: (p) => {
      const pct = p.percent === undefined ? undefined : Math.floor(p.percent);
      if (p.step === "bootstrap" && pct === last) return;
      if (pct !== undefined) last = pct;
      progress(`packages: ${p.message}`);
    },
  });
  // Used now: the manifest's mtime keeps it from prunePackageImages for a day.
  const now = new Date();
  await utimes(`${built}.json`, now, now).catch(() => {});
  return built;
}

/** Package sets kept however long unused: the most recently used ones. */
const KEEP_PACKAGE_IMAGES = 3;
/** A package set unused this long (and not among the most recent) is removed. */
const PACKAGE_IMAGE_IDLE_MS = 24 * 3600_000;

/**
 * The package sets recipes are built on (`images/pkgs-<hash>`, a build of the base image with more
 * packages) are a cache: an image made from one is a snapshot of its own and needs it no more.
 * Keeps `inUse`, the most recently used few, and any used within a day (its manifest's mtime is
 * when it was last used: `recipeBase` touches it); removes the rest, each under its build's lock
 * (never one being built). Returns the names removed.
 */
export async function prunePackageImages(poolDir: string, inUse: string, now = Date.now()): Promise<string[]> {
  const images = join(poolDir, "images");
  const sets: { name: string; usedAt: number }[] = [];
  for (const name of await readdir(images)) {
    if (!/^pkgs-[0-9a-f]{16}$/.test(name)) continue;
    const st = await lstat(join(images, `${name}.json`)).catch(() => undefined);
    if (st?.isFile()) sets.push({ name, usedAt: st.mtimeMs });
  }
  sets.sort((a, b) => b.usedAt - a.usedAt);
  const removed: string[] = [];
  for (const [i, set] of sets.entries()) {
    if (i < KEEP_PACKAGE_IMAGES || join(images, set.name) === inUse) continue;
    if (now - set.usedAt < PACKAGE_IMAGE_IDLE_MS) continue;
    const paths = imagePaths(poolDir, set.name);
    await withFileLock(paths.lock, async () => {
      // The manifest first: without it the set is not a cached build any more.
      await rm(paths.manifest, { force: true });
      if (await isSubvolume(paths.path)) await deleteSubvolume(paths.path);
    });
    await rm(paths.lock, { force: true });
    removed.push(set.name);
  }
  return removed;
}

/** Writes a recipe's files into `root` (a tree no unit has run on), every path resolved inside it. */
async function writeFiles(ctx: RecipeContext, root: string, recipe: ImageRecipe): Promise<void> {
  const shift = ctx.idShift;
  for (const f of recipe.files ?? []) {
    const entry = await resolveEntry(root, entryComponents(f.path), {
      mkdir: async (path) => {
        await mkdir(path, { mode: 0o755 });
        await lchown(path, shift, shift);
      },
    });
    if (!entry) throw new ImageArchiveError(`files: ${f.path}: its directory could not be made`);
    const old = await lstat(entry.path).catch(() => undefined);
    if (old?.isDirectory()) throw new ImageArchiveError(`files: ${f.path} is a directory in the image`);
    if (old) await rm(entry.path);
    const fh = await open(
      entry.path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o600,
    );
    try {
      await fh.writeFile(fileBytes(f));
      const owner = fileOwner(f);
      await fh.chown(shift + owner.uid, shift + owner.gid);
      await fh.chmod(fileMode(f)); // after the chown, which clears setuid bits
    } finally {
      await fh.close();
    }
  }
}

/**
 * The draft of image `imageId`: a writable snapshot of its base (with the recipe's packages) at
 * `imported/<id>`, with the recipe's files. A leftover of the same id goes first.
 */
export async function draftRecipeImage(
  ctx: RecipeContext,
  imageId: string,
  recipe: ImageRecipe,
  progress: (message: string) => void,
  signal?: AbortSignal,
): Promise<void> {
  const base = await recipeBase(ctx, recipe.packages ?? [], progress, signal);
  await mkdir(importedDir(ctx.paths), { recursive: true });
  await removeImported(ctx.paths, imageId);
  const root = importedPath(ctx.paths, imageId);
  await snapshot(base, root, { readonly: false });
  if (base !== ctx.imagePath) {
    const gone = await prunePackageImages(ctx.poolDir, base).catch((err: unknown) => {
      progress(`older package sets could not be removed: ${err instanceof Error ? err.message : String(err)}`);
      return [] as string[];
    });
    if (gone.length > 0) progress(`removed ${gone.length} package set${gone.length === 1 ? "" : "s"} unused for a day`);
  }
  if ((recipe.files ?? []).length > 0) {
    progress(`writing ${recipe.files?.length} files`);
    await writeFiles(ctx, root, recipe);
  }
}

/** The image becomes a unit's checkpoint (the unit that ran the recipe's steps). */
export async function imageFromCheckpoint(
  ctx: RecipeContext,
  imageId: string,
  unitId: string,
  cpId: string,
): Promise<void> {
  await removeImported(ctx.paths, imageId);
  await snapshot(ctx.paths.checkpoint(unitId, cpId), importedPath(ctx.paths, imageId), { readonly: false });
}

/** Apparent size of an image's regular files (lstat only: nothing is followed). */
export async function imageBytes(ctx: RecipeContext, imageId: string): Promise<number> {
  let bytes = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) bytes += (await lstat(p)).size;
    }
  };
  await walk(importedPath(ctx.paths, imageId));
  return bytes;
}

/** Makes the image read-only and returns its units' config (the recipe's env, user and workdir) and size. */
export async function sealRecipeImage(
  ctx: RecipeContext,
  imageId: string,
  recipe: ImageRecipe,
): Promise<{ config: ImageConfig; bytes: number }> {
  const root = importedPath(ctx.paths, imageId);
  const config = await imageConfigFor(root, {
    env: Object.entries(recipe.env ?? {}).map(([k, v]) => `${k}=${v}`),
    workingDir: recipe.workdir ?? null,
    user: recipe.user ?? "unit",
  });
  await setReadonly(root, true);
  return { config, bytes: await imageBytes(ctx, imageId) };
}
