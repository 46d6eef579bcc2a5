import { chmod, lchown, lstat, readdir } from "node:fs/promises";
import { join } from "node:path";

/**
 * Host uid/gid that is root (0) inside a unit's user namespace. Images are stored shifted: a file
 * owned by uid N in the image is owned by UID_SHIFT + N on the host. The runtime maps container ids
 * 0..UID_RANGE-1 to host ids UID_SHIFT..UID_SHIFT+UID_RANGE-1 (OCI uidMappings/gidMappings).
 */
export const UID_SHIFT = 100000;
/** Number of ids mapped into a unit (`size` of the OCI id mapping). */
export const UID_RANGE = 65536;

/**
 * The host id for an image id. Ids already at or above `shift` are taken as shifted and kept, so a
 * second pass changes nothing. Ids in [range, shift) cannot be mapped and are an error.
 */
export function shiftId(id: number, shift = UID_SHIFT, range = UID_RANGE): number {
  if (!Number.isInteger(id) || id < 0) throw new RangeError(`invalid id ${id}`);
  if (id >= shift) return id;
  if (id >= range) throw new RangeError(`id ${id} is outside the ${range} ids a unit maps`);
  return id + shift;
}

/** The inverse: the id a process inside the unit sees for host id `hostId` (undefined: unmapped, "nobody"). */
export function unshiftId(hostId: number, shift = UID_SHIFT, range = UID_RANGE): number | undefined {
  return hostId >= shift && hostId < shift + range ? hostId - shift : undefined;
}

export interface ShiftStats {
  /** Entries visited (files, directories, symlinks, ...), the root included. */
  entries: number;
  /** Entries whose owner changed. */
  changed: number;
  /** Sum of the sizes of regular files (hard links counted once per name). */
  bytes: number;
}

/** Runs at most `n` of the given tasks at once. */
function limiter(n: number) {
  let active = 0;
  const queue: Array<() => void> = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= n) await new Promise<void>((resolve) => queue.push(resolve));
    active++;
    try {
      return await task();
    } finally {
      active--;
      queue.shift()?.();
    }
  };
}

/**
 * Shifts the owner of every entry under `root` (the root itself, directories and symlinks included,
 * never following symlinks or crossing into another filesystem/subvolume) by `shift` with lchown, and
 * restores the setuid/setgid bits that chown clears. Idempotent: entries already shifted are skipped.
 * File capabilities (security.capability xattrs) are cleared by chown and not restored.
 */
export async function shiftTree(
  root: string,
  opts: { shift?: number; range?: number; concurrency?: number } = {},
): Promise<ShiftStats> {
  const shift = opts.shift ?? UID_SHIFT;
  const range = opts.range ?? UID_RANGE;
  const limit = limiter(opts.concurrency ?? 64);
  const stats: ShiftStats = { entries: 0, changed: 0, bytes: 0 };
  const rootStat = await lstat(root);

  async function fix(path: string, st: Awaited<ReturnType<typeof lstat>>): Promise<void> {
    stats.entries++;
    if (st.isFile()) stats.bytes += Number(st.size);
    const uid = Number(st.uid);
    const gid = Number(st.gid);
    let newUid: number;
    let newGid: number;
    try {
      newUid = shiftId(uid, shift, range);
      newGid = shiftId(gid, shift, range);
    } catch (err) {
      throw new Error(`${path}: ${(err as Error).message}`);
    }
    if (newUid === uid && newGid === gid) return;
    await limit(() => lchown(path, newUid, newGid));
    stats.changed++;
    const mode = Number(st.mode);
    if (!st.isSymbolicLink() && mode & 0o6000) await limit(() => chmod(path, mode & 0o7777));
  }

  async function visit(path: string, st: Awaited<ReturnType<typeof lstat>>): Promise<void> {
    await fix(path, st);
    if (!st.isDirectory()) return;
    const names = await limit(() => readdir(path));
    await Promise.all(
      names.map(async (name) => {
        const p = join(path, name);
        const s = await limit(() => lstat(p));
        if (s.dev !== rootStat.dev) return; // a mount point or nested subvolume: not ours to shift
        await visit(p, s);
      }),
    );
  }

  await visit(root, rootStat);
  return stats;
}
