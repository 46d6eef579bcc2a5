import { openPool, type Pool } from "../storage/pool.js";
import { type BuildProgress, buildImage } from "./build.js";
import { type ImageManifest, readImageManifest } from "./image-store.js";

/**
 * The shared test image: the "test" variant, built once into a pool that persists across test runs
 * and test files, so that suites that need a unit rootfs do not each pay the ~40 s build.
 *
 * The pool lives in `/var/tmp/ums-test-pool` (override with UMS_TEST_POOL_DIR): a sparse loop file
 * `pool.img` mounted at `pool/`. Concurrent test processes wait on the pool's and the image's lock
 * files instead of building twice. Tests that snapshot the image must delete their snapshots.
 *
 * To remove it (e.g. to free the disk or force a rebuild):
 *   umount /var/tmp/ums-test-pool/pool
 *   losetup -j /var/tmp/ums-test-pool/pool.img   # then: losetup -d /dev/loopN for each line
 *   rm -rf /var/tmp/ums-test-pool
 * or, from code, `closePool({ dataDir: testPoolDir() })` and remove the directory.
 */

export const TEST_IMAGE_NAME = "test";
export const DEFAULT_TEST_POOL_DIR = "/var/tmp/ums-test-pool";
const TEST_POOL_SIZE = 16 * 1024 ** 3;

export function testPoolDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.UMS_TEST_POOL_DIR || DEFAULT_TEST_POOL_DIR;
}

export interface TestImage {
  pool: Pool;
  /** The read-only image subvolume. */
  path: string;
  manifest: ImageManifest;
}

let shared: Promise<TestImage> | undefined;

/** Opens the shared test pool and builds the "test" image in it once (cached across runs). */
export function testImage(opts: { onProgress?: (p: BuildProgress) => void } = {}): Promise<TestImage> {
  shared ??= (async () => {
    const pool = await openPool({ dataDir: testPoolDir(), sizeBytes: TEST_POOL_SIZE });
    let announced = false;
    const path = await buildImage({
      pool,
      name: TEST_IMAGE_NAME,
      variant: "test",
      onProgress: (p) => {
        if (!announced && p.step !== "cache") {
          announced = true;
          process.stderr.write(`# building the shared test image in ${pool.path} (about a minute, once)\n`);
        }
        opts.onProgress?.(p);
      },
    });
    const manifest = await readImageManifest(pool, TEST_IMAGE_NAME);
    if (!manifest) throw new Error(`test image ${path} has no manifest`);
    return { pool, path, manifest };
  })();
  shared.catch(() => {
    shared = undefined;
  });
  return shared;
}
