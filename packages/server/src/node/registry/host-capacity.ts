import { readFile, statfs } from "node:fs/promises";
import { availableParallelism, totalmem } from "node:os";
import type { NodeCapacity, NodeFree } from "../../store/records.js";

/** `MemAvailable` of /proc/meminfo (what can be had without swapping), in bytes. */
export async function availableMemory(): Promise<number> {
  const text = await readFile("/proc/meminfo", "utf8");
  const kb = Number(/^MemAvailable:\s+(\d+) kB$/m.exec(text)?.[1]);
  if (!Number.isFinite(kb)) throw new Error("/proc/meminfo has no MemAvailable line");
  return kb * 1024;
}

/** The filesystem holding `path`: its size and what an unprivileged writer has free, in bytes. */
export async function diskSpace(path: string): Promise<{ size: number; free: number }> {
  const s = await statfs(path);
  return { size: s.blocks * s.bsize, free: s.bavail * s.bsize };
}

/**
 * Issue #15: what this host has, for its node's row; the disk is that of the first of `diskPaths`
 * that exists (the unit pool's mount, else the data dir: a runtime without a pool of its own).
 */
export async function measureHost(
  diskPaths: readonly string[],
  unitSlots: number | undefined,
): Promise<{ capacity: NodeCapacity; free: NodeFree }> {
  const firstDisk = async () => {
    for (const p of diskPaths.slice(0, -1)) {
      const s = await diskSpace(p).catch(() => undefined);
      if (s) return s;
    }
    return diskSpace(diskPaths[diskPaths.length - 1] ?? "/");
  };
  const [memory, disk] = await Promise.all([availableMemory(), firstDisk()]);
  return {
    capacity: {
      cpus: availableParallelism(),
      memoryBytes: totalmem(),
      diskBytes: disk.size,
      unitSlots: unitSlots ?? null,
    },
    free: { memoryBytes: memory, diskBytes: disk.free },
  };
}
