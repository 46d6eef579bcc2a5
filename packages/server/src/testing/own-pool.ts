import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testImage } from "../runtime/image/test-image.js";
import { closePool, openPool } from "../runtime/storage/pool.js";

/** `btrfs send SRC | btrfs receive DIR`: a read-only subvolume (the test image) in another pool. */
export function copySubvolume(src: string, dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const send = spawn("btrfs", ["send", "-q", src], { stdio: ["ignore", "pipe", "inherit"] });
    const receive = spawn("btrfs", ["receive", "-q", dir], { stdio: ["pipe", "ignore", "inherit"] });
    send.stdout.pipe(receive.stdin);
    let left = 2;
    const done = (what: string) => (code: number | null) => {
      if (code !== 0) reject(new Error(`btrfs ${what} exited ${code}`));
      else if (--left === 0) resolve();
    };
    send.on("close", done("send"));
    receive.on("close", done("receive"));
  });
}

/**
 * A btrfs pool of a test's own (a loop file of `sizeBytes`) with the test image copied in: for a
 * server that must not share the shared test pool (a small pool to fill; a second node whose disk
 * is its own). `pool` is what TestServerOpts.pool takes; `close()` unmounts and removes it.
 */
export async function openOwnPool(
  sizeBytes: number,
): Promise<{ pool: { path: string; imagePath: string }; close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "ums-own-pool-"));
  try {
    const pool = await openPool({ dataDir: dir, sizeBytes });
    try {
      await copySubvolume((await testImage()).path, pool.imagesDir);
    } catch (err) {
      await closePool(pool).catch(() => {});
      throw err;
    }
    return {
      pool: { path: pool.path, imagePath: join(pool.imagesDir, "test") },
      close: async () => {
        try {
          await closePool(pool);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}
