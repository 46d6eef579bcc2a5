import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

// CPU fair share between units and the host (issue #19 finding 9; docs/SECURITY.md): CFS bandwidth
// control (kernel docs scheduler/sched-bwc.rst) caps each unit and all units together, and CFS
// shares (cgroup-v1/cgroups.rst, the cpu controller) keep the server ahead of the units.

/** The CFS period every quota is given in: 100 ms, the kernel's default. */
export const CFS_PERIOD_US = 100_000;
/** The kernel's smallest quota. */
const MIN_QUOTA_US = 1000;
/** What a multi-core host keeps for itself however busy the units are. */
export const HOST_RESERVE_CORES = 0.5;

/** `cores` of CPU time as a CFS quota per period (`linux.resources.cpu` of the OCI spec). */
export function cfsQuota(cores: number): { quota: number; period: number } {
  return { quota: Math.max(MIN_QUOTA_US, Math.round(cores * CFS_PERIOD_US)), period: CFS_PERIOD_US };
}

/**
 * The cores all units of a server may use together, which is also the most one unit may have (in
 * cgroup v1 the kernel refuses a child quota above its parent's): on a multi-core host all but half
 * a core, so that the server, the agents' host side and the host's own tasks always find a CPU with
 * time left; a single core is all given (there the shares below keep the server first).
 */
export function unitsCpuBudget(hostCores: number): number {
  return hostCores >= 2 ? hostCores - HOST_RESERVE_CORES : hostCores;
}

/**
 * The units' parent cgroup weighs a quarter of the cgroup the server runs in (its top-level one,
 * the sibling of `/ums-<rid>`; tasks of the root cgroup weigh 1024 each): when the host is short of
 * CPU, the server gets four times what all units together get, so the API, the agents' host side
 * and the commands it runs (runc, nft) answer while units are busy; an idle server costs the units
 * nothing (shares only count under contention).
 */
export function unitsCpuShares(serverShares: number): number {
  return Math.max(2, Math.floor(serverShares / 4));
}

/** cpu.shares of the top-level cgroup this process is in (1024, a nice-0 task's weight, at the root). */
async function serverCpuShares(cpuRoot: string): Promise<number> {
  const own = await readFile("/proc/self/cgroup", "utf8").catch(() => "");
  // v1 lines are `id:controllers:path`; the cpu controller may be mounted alone or as `cpu,cpuacct`.
  const path = own
    .split("\n")
    .map((l) => l.split(":"))
    .find(([, controllers]) => controllers?.split(",").includes("cpu"))?.[2];
  const top = path?.split("/").filter(Boolean)[0];
  if (!top) return 1024;
  const shares = Number((await readFile(join(cpuRoot, top, "cpu.shares"), "utf8").catch(() => "")).trim());
  return Number.isInteger(shares) && shares > 0 ? shares : 1024;
}

/**
 * Creates (or updates) `/ums-<rid>` in the v1 cpu controller before any unit is put below it: the
 * shares above and, on a multi-core host, the quota of `unitsCpuBudget`. A host without the v1 cpu
 * controller (cgroup v2 only) is left alone; there `cpu.weight` and `cpu.max` are the equivalents.
 */
export async function configureUnitsCpu(cgroupRoot: string, rid: string, hostCores: number): Promise<void> {
  const cpuRoot = join(cgroupRoot, "cpu");
  try {
    await readFile(join(cpuRoot, "cpu.shares"));
  } catch {
    return;
  }
  const dir = join(cpuRoot, `ums-${rid}`);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "cpu.shares"), String(unitsCpuShares(await serverCpuShares(cpuRoot))));
  const { quota, period } = cfsQuota(unitsCpuBudget(hostCores));
  await writeFile(join(dir, "cpu.cfs_period_us"), String(period));
  await writeFile(join(dir, "cpu.cfs_quota_us"), hostCores >= 2 ? String(quota) : "-1").catch((err) => {
    // EINVAL: a unit still running from before has a quota above the new total (fewer cores now).
    throw new Error(
      `cannot limit all units to ${unitsCpuBudget(hostCores)} cores (${dir}): ${(err as Error).message}; a running unit has more (stop it, or lower its resources policy's cpu.cores)`,
    );
  });
}
