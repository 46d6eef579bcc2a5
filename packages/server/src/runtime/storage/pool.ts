import { mkdir, open, realpath, rename, rm, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { CommandError, run } from "../exec/host-command.js";
import { withFileLock } from "./lock.js";
import { mountAt } from "./mounts.js";

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
/** Default size of the sparse loop file: 64 GiB, or 90 % of the free space when less, never below 2 GiB. */
export const DEFAULT_POOL_SIZE = 64 * GiB;
export const MIN_POOL_SIZE = 2 * GiB;
export const POOL_MOUNT_OPTIONS = "noatime,compress=zstd:1";

export interface OpenPoolOptions {
  /** The server's data directory; the pool is mounted at `<dataDir>/pool`. */
  dataDir: string;
  /** A block device to use instead of the loop file `<dataDir>/pool.img`. Formatted only when it has no filesystem. */
  device?: string;
  /** Size of a new loop file (ignored when it exists or with `device`). */
  sizeBytes?: number;
}

/** A mounted btrfs pool (docs/ARCHITECTURE.md section 4). */
export interface Pool {
  readonly dataDir: string;
  /** The mount point, `<dataDir>/pool`. */
  readonly path: string;
  /** `<path>/images`: base image subvolumes (read-only) and their `.json` manifests. */
  readonly imagesDir: string;
  /** `<path>/units`: one directory per unit (rootfs subvolume, checkpoints). */
  readonly unitsDir: string;
  /** The mounted block device (a /dev/loopN for a loop file). */
  readonly device: string;
  /** `<dataDir>/pool.img` when the pool lives in a loop file. */
  readonly backingFile: string | undefined;
  /** True when this open created the filesystem (mkfs). */
  readonly formatted: boolean;
}

/** The loop file size for a data dir on a filesystem with `freeBytes` available. */
export function defaultPoolSize(freeBytes: number): number {
  const size = Math.min(DEFAULT_POOL_SIZE, Math.floor(freeBytes * 0.9));
  return Math.max(MIN_POOL_SIZE, Math.floor(size / MiB) * MiB);
}

/** The filesystem type found on a device or image file, or undefined when there is none. */
export async function probeFilesystem(deviceOrFile: string): Promise<string | undefined> {
  try {
    const { stdout } = await run("blkid", ["-p", "-o", "value", "-s", "TYPE", deviceOrFile]);
    return stdout.trim() || undefined;
  } catch (err) {
    // blkid exits 2 when it finds nothing.
    if (err instanceof CommandError && err.exitCode === 2) return undefined;
    throw err;
  }
}

/** Loop devices backed by `file` (`losetup -j`). */
export async function loopDevicesFor(file: string): Promise<string[]> {
  const { stdout } = await run("losetup", ["--list", "--noheadings", "--output", "NAME", "--associated", file]);
  return stdout
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
}

export function poolPaths(dataDir: string) {
  const path = join(dataDir, "pool");
  return { path, imagesDir: join(path, "images"), unitsDir: join(path, "units"), file: join(dataDir, "pool.img") };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Creates `<file>` as a sparse btrfs image, atomically (mkfs on a temp file, then rename). */
async function createLoopFile(file: string, sizeBytes: number): Promise<void> {
  const tmp = `${file}.new`;
  await rm(tmp, { force: true });
  const fh = await open(tmp, "wx", 0o600);
  try {
    await fh.truncate(sizeBytes);
  } finally {
    await fh.close();
  }
  try {
    await run("mkfs.btrfs", ["-q", "-L", "ums-pool", tmp]);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Opens the btrfs pool of a data dir: creates and formats the loop file (or formats an empty device),
 * attaches a loop device (reusing one already attached to the file), mounts it at `<dataDir>/pool`
 * and creates `images/` and `units/`. Opening a pool that is already mounted is a no-op apart from
 * the directory checks; concurrent opens (processes or callers) are serialised by a lock file.
 */
export async function openPool(opts: OpenPoolOptions): Promise<Pool> {
  await mkdir(opts.dataDir, { recursive: true, mode: 0o700 });
  const dataDir = await realpath(opts.dataDir);
  const { path, imagesDir, unitsDir, file } = poolPaths(dataDir);
  return withFileLock(join(dataDir, "pool.lock"), async () => {
    await mkdir(path, { recursive: true, mode: 0o755 });
    let formatted = false;
    let device: string;
    let backingFile: string | undefined;

    if (opts.device) {
      device = await realpath(opts.device);
      const fs = await probeFilesystem(device);
      if (fs === undefined) {
        await run("mkfs.btrfs", ["-q", "-L", "ums-pool", device]);
        formatted = true;
      } else if (fs !== "btrfs") {
        throw new Error(
          `pool device ${device} holds a ${fs} filesystem; refusing to format it (expected btrfs or empty)`,
        );
      }
    } else {
      backingFile = file;
      if (!(await exists(file))) {
        const { bavail, bsize } = await statfs(dataDir);
        await createLoopFile(file, opts.sizeBytes ?? defaultPoolSize(bavail * bsize));
        formatted = true;
      } else {
        const fs = await probeFilesystem(file);
        if (fs !== "btrfs") {
          throw new Error(
            `${file} exists but holds ${fs ? `a ${fs} filesystem` : "no filesystem"}; move it away to create a new pool`,
          );
        }
      }
      device = "";
    }

    const mounted = await mountAt(path);
    if (mounted) {
      if (mounted.fsType !== "btrfs")
        throw new Error(`${path} is already mounted (${mounted.fsType} from ${mounted.source})`);
      const expected = backingFile ? await loopDevicesFor(backingFile) : [device];
      if (!expected.includes(mounted.source)) {
        throw new Error(`${path} is already mounted from ${mounted.source}, not from ${backingFile ?? device}`);
      }
      device = mounted.source;
    } else {
      if (backingFile) {
        const loops = await loopDevicesFor(backingFile);
        device = loops[0] ?? (await run("losetup", ["--find", "--show", backingFile])).stdout.trim();
        if (!device) throw new Error(`losetup gave no loop device for ${backingFile}`);
      }
      try {
        await run("mount", ["-t", "btrfs", "-o", POOL_MOUNT_OPTIONS, device, path]);
      } catch (err) {
        if (backingFile && formatted) await run("losetup", ["--detach", device]).catch(() => {});
        throw err;
      }
    }
    await mkdir(imagesDir, { recursive: true, mode: 0o700 });
    // Units run as an unprivileged host uid (the shift) that runc must let through to their rootfs.
    await mkdir(unitsDir, { recursive: true, mode: 0o711 });
    return Object.freeze({ dataDir, path, imagesDir, unitsDir, device, backingFile, formatted });
  });
}

/**
 * `umount`, waiting up to 5 s for a pool that is busy (a process that was in it is still going
 * away); then detached lazily (it goes once its last user does), with a warning: a pool a stray
 * shell sits in must not fail a test run that passed.
 */
async function unmountPool(path: string): Promise<"unmounted" | "lazily"> {
  for (let i = 0; ; i++) {
    try {
      await run("umount", [path]);
      return "unmounted";
    } catch (err) {
      if (!(err instanceof CommandError) || !/target is busy/.test(err.stderr)) throw err;
      if (i >= 10) break;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  process.stderr.write(`warning: ${path} is still in use (fuser -vm ${path} names who); detached lazily\n`);
  await run("umount", ["--lazy", path]);
  return "lazily";
}

/**
 * Waits up to `ms` until no loop device is backed by `file`. `losetup --detach` of a device the
 * kernel still holds (a mount just let go of it) only marks it autoclear: it goes a moment later,
 * and a caller that reuses or deletes the file right away must not see it still listed.
 */
async function loopDevicesGone(file: string, ms: number): Promise<boolean> {
  for (const t0 = performance.now(); ; ) {
    if ((await loopDevicesFor(file)).length === 0) return true;
    if (performance.now() - t0 >= ms) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Unmounts a pool and detaches the loop devices of its backing file. The server leaves its pool
 * mounted; this is for tests and tools. Accepts a {@link Pool} or just its data dir.
 */
export async function closePool(pool: Pick<Pool, "dataDir"> & Partial<Pool>): Promise<void> {
  const dataDir = await realpath(pool.dataDir).catch(() => pool.dataDir);
  const { path, file } = poolPaths(dataDir);
  const backingFile = pool.backingFile ?? ((await exists(file)) ? file : undefined);
  await withFileLock(join(dataDir, "pool.lock"), async () => {
    // Without a loop file or a known device, the btrfs mounted at <dataDir>/pool is taken as the pool.
    const ours = backingFile ? await loopDevicesFor(backingFile) : pool.device ? [pool.device] : undefined;
    let lazily = false;
    for (let i = 0; i < 8; i++) {
      const m = await mountAt(path);
      if (!m) break;
      if (ours ? !ours.includes(m.source) : m.fsType !== "btrfs") {
        throw new Error(`${path} is mounted from ${m.source} (${m.fsType}), which is not this pool`);
      }
      if ((await unmountPool(path)) === "lazily") lazily = true;
    }
    if (backingFile) {
      for (const dev of await loopDevicesFor(backingFile)) {
        // The kernel may clear it between the listing and the detach: only one still there is an error.
        await run("losetup", ["--detach", dev]).catch(async (err) => {
          if ((await loopDevicesFor(backingFile)).includes(dev)) throw err;
        });
      }
      // A pool detached lazily keeps its device until its last user goes; that may be long.
      if (!lazily && !(await loopDevicesGone(backingFile, 5000))) {
        process.stderr.write(
          `warning: a loop device of ${backingFile} is still attached (losetup -j ${backingFile})\n`,
        );
      }
    }
  }).catch(async (err) => {
    // The data dir may already be gone; nothing then to unlock.
    if ((err as NodeJS.ErrnoException).code === "ENOENT" && !(await exists(dataDir))) return;
    throw err;
  });
}
