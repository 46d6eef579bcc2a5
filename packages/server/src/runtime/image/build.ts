import { mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { run } from "../exec/host-command.js";
import { createSubvolume, deleteSubvolume, isSubvolume, setReadonly } from "../storage/btrfs.js";
import { withFileLock } from "../storage/lock.js";
import { unmountBelow } from "../storage/mounts.js";
import type { Pool } from "../storage/pool.js";
import { bootstrap } from "./bootstrap.js";
import { readFileCapabilities, writeNamespacedCapabilities } from "./caps.js";
import { cacheProblem, IMAGE_CONTENT_VERSION, type ImageManifest, type ImagePaths, imagePaths } from "./image-store.js";
import { DEBIAN_SUITE, debianSources, IMAGE_PACKAGES, IMAGE_VARIANTS, type ImageVariant } from "./packages.js";
import { configureRootfs, installedPackages, UNIT_USER } from "./rootfs-config.js";
import { type ShiftStats, shiftTree, UID_RANGE, UID_SHIFT } from "./shift.js";

export type BuildStep = "cache" | "wait" | "prepare" | "bootstrap" | "configure" | "shift" | "finalize" | "done";

export interface BuildProgress {
  step: BuildStep;
  message: string;
  /** 0-100 overall, when known. */
  percent?: number;
}

export interface BuildImageOptions {
  /** The pool, or its mount point. */
  pool: Pick<Pool, "path"> | string;
  /** Image name: the subvolume is `<pool>/images/<name>`. */
  name: string;
  variant: ImageVariant;
  /** The packages on top of minbase; default the variant's (an image recipe adds its own). */
  packages?: readonly string[];
  /** Rebuild even when a valid cached image exists (it is replaced at the end of the build). */
  force?: boolean;
  /** apt sources (`deb URL SUITE COMPONENTS` lines); default {@link debianSources}. */
  sources?: string[];
  onProgress?: (progress: BuildProgress) => void;
  /** Aborting kills mmdebstrap and removes the half-built image. */
  signal?: AbortSignal;
}

/**
 * Builds (or returns from cache) the base image `<pool>/images/<name>`: a read-only btrfs subvolume
 * holding a Debian minbase bootstrap with the variant's packages, the user `unit` with passwordless
 * sudo, placeholders the runtime fills at boot, and every owner shifted by {@link UID_SHIFT}.
 * Concurrent builds of one image (processes or callers) are serialised by a lock file; the second
 * one finds the first one's result in the cache.
 */
export async function buildImage(opts: BuildImageOptions): Promise<string> {
  if (!IMAGE_VARIANTS.includes(opts.variant)) throw new Error(`unknown image variant '${opts.variant}'`);
  const paths = imagePaths(opts.pool, opts.name);
  const report = (p: BuildProgress) => opts.onProgress?.(p);

  const packages = opts.packages ?? IMAGE_PACKAGES[opts.variant];
  if (!opts.force && (await cacheProblem(paths, opts.variant, packages)) === undefined) {
    report({ step: "cache", message: `image ${opts.name} is built (cached)`, percent: 100 });
    return paths.path;
  }
  return withFileLock(
    paths.lock,
    async () => {
      const problem = await cacheProblem(paths, opts.variant, packages);
      if (problem === undefined && !opts.force) {
        report({ step: "cache", message: `image ${opts.name} was built by another process`, percent: 100 });
        return paths.path;
      }
      await build(opts, paths, problem ?? "rebuild forced", report);
      return paths.path;
    },
    {
      timeoutMs: 30 * 60_000,
      onWait: (pid) =>
        report({ step: "wait", message: `waiting for another build of ${opts.name} (pid ${pid ?? "?"})`, percent: 0 }),
    },
  );
}

async function removeBuilding(building: string): Promise<void> {
  await unmountBelow(building);
  if (await isSubvolume(building)) await deleteSubvolume(building);
  else await rm(building, { recursive: true, force: true });
}

async function build(
  opts: BuildImageOptions,
  paths: ImagePaths,
  reason: string,
  report: (p: BuildProgress) => void,
): Promise<void> {
  const started = Date.now();
  const packages = [...(opts.packages ?? IMAGE_PACKAGES[opts.variant])];
  const sources = opts.sources ?? debianSources();
  report({ step: "prepare", message: `building image ${opts.name} (${opts.variant}): ${reason}`, percent: 0 });
  if (await stat(paths.building).catch(() => undefined)) {
    report({ step: "prepare", message: "removing the leftover of an interrupted build", percent: 1 });
    await removeBuilding(paths.building);
  }
  await createSubvolume(paths.building);
  await rm(paths.tmp, { recursive: true, force: true });
  await mkdir(paths.tmp, { mode: 0o700 });
  try {
    await bootstrap(paths.building, paths.tmp, packages, sources, report, opts.signal);
    opts.signal?.throwIfAborted();

    report({ step: "configure", message: `user ${UNIT_USER.name}, sudo, placeholders`, percent: 86 });
    await configureRootfs(paths.building);
    const installed = await installedPackages(paths.building);
    opts.signal?.throwIfAborted();

    const shifted = await shiftOwners(paths.building, report);
    opts.signal?.throwIfAborted();

    report({ step: "finalize", message: `making ${paths.path} read-only`, percent: 97 });
    await putInPlace(paths);
    const manifest: ImageManifest = {
      name: opts.name,
      variant: opts.variant,
      contentVersion: IMAGE_CONTENT_VERSION,
      suite: DEBIAN_SUITE,
      sources,
      packages,
      installed,
      uidShift: UID_SHIFT,
      uidRange: UID_RANGE,
      user: UNIT_USER,
      builtAt: new Date().toISOString(),
      buildSeconds: Math.round((Date.now() - started) / 100) / 10,
      entries: shifted.entries,
      bytes: shifted.bytes,
    };
    await writeFile(`${paths.manifest}.tmp`, `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o644 });
    await rename(`${paths.manifest}.tmp`, paths.manifest);
    report({ step: "done", message: `image ${opts.name} built in ${manifest.buildSeconds} s`, percent: 100 });
  } catch (err) {
    await removeBuilding(paths.building).catch(() => {});
    throw err;
  } finally {
    await rm(paths.tmp, { recursive: true, force: true });
  }
}

/** The shift step: every owner moved into the units' id range, file capabilities kept where python3 can read them. */
async function shiftOwners(root: string, report: (p: BuildProgress) => void): Promise<ShiftStats> {
  report({ step: "shift", message: `shifting owners by ${UID_SHIFT}`, percent: 90 });
  const t0 = Date.now();
  const caps = await readFileCapabilities(root);
  const shifted = await shiftTree(root);
  if (caps) await writeNamespacedCapabilities(root, caps, UID_SHIFT);
  else report({ step: "shift", message: "no python3 in the image: file capabilities were not kept", percent: 95 });
  report({
    step: "shift",
    message: `${shifted.changed} of ${shifted.entries} entries shifted in ${Date.now() - t0} ms${
      caps && Object.keys(caps).length ? `; file capabilities kept on ${Object.keys(caps).join(", ")}` : ""
    }`,
    percent: 96,
  });
  return shifted;
}

/** The finished build, read-only, replaces the image (and its manifest, written afterwards). */
async function putInPlace(paths: ImagePaths): Promise<void> {
  await setReadonly(paths.building, true);
  await rm(paths.manifest, { force: true });
  if (await isSubvolume(paths.path)) await deleteSubvolume(paths.path);
  else await rm(paths.path, { recursive: true, force: true });
  // A read-only subvolume can be renamed within its parent directory.
  await rename(paths.building, paths.path);
  await run("btrfs", ["filesystem", "sync", paths.path]);
}
