import { existsSync } from "node:fs";
import { readdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { KernelFiles } from "../../usage/kernel-files.js";
import type { UnitStats } from "../runtime.js";

/** Where the cgroup v1 controllers are mounted (one hierarchy each). */
export const CGROUP_ROOT = "/sys/fs/cgroup";

/** cgroup v1 freezer (kernel docs, cgroup-v1/freezer-subsystem): false when the file is missing. */
export async function setFrozen(cgroupsPath: string, frozen: boolean): Promise<boolean> {
  const file = join(CGROUP_ROOT, "freezer", cgroupsPath, "freezer.state");
  if (!existsSync(file)) return false;
  await writeFile(file, frozen ? "FROZEN" : "THAWED");
  if (!frozen) return true;
  // FREEZING until every task has stopped; give up (and thaw) if it does not settle.
  for (let i = 0; i < 400; i++) {
    if ((await readFile(file, "utf8")).trim() === "FROZEN") return true;
    await new Promise((r) => setTimeout(r, 5));
  }
  await writeFile(file, "THAWED");
  throw new Error(`could not freeze ${cgroupsPath}: tasks did not stop within 2 s`);
}

/**
 * SIGKILLs every task of a unit's cgroup and waits until none is left. Frozen first (a paused
 * unit already is): a frozen task cannot fork, so one pass over cgroup.procs reaches every task of
 * even a fork bomb; the kills are pending until the thaw, when all die at once. Without the
 * freezer (or if it cannot settle, a task stuck in the kernel) it kills in passes until none is left.
 * The unit's CPU quota goes first: freezing and dying take each task some CPU time, which a
 * storm's throttled cgroup would hand out over seconds.
 */
export async function killCgroup(cgroupsPath: string): Promise<void> {
  const procsFile = join(CGROUP_ROOT, "pids", cgroupsPath, "cgroup.procs");
  if (!existsSync(procsFile)) return;
  // -1: no quota of its own; the units' parent cgroup still caps it (cpu-share.ts).
  await writeFile(join(CGROUP_ROOT, "cpu", cgroupsPath, "cpu.cfs_quota_us"), "-1").catch(() => {});
  const frozen = await setFrozen(cgroupsPath, true).catch(() => false);
  const tasks = async () => (await readFile(procsFile, "utf8").catch(() => "")).split("\n").filter(Boolean).map(Number);
  const killAll = (pids: number[]) => {
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  };
  if (frozen) {
    killAll(await tasks());
    await setFrozen(cgroupsPath, false).catch(() => {});
  }
  for (let i = 0; i < 1000; i++) {
    const pids = await tasks();
    if (pids.length === 0) return;
    killAll(pids);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Whether the cgroup has a task (no process spawned); undefined without a v1 pids cgroup to read. */
export async function cgroupHasTasks(cgroupsPath: string): Promise<boolean | undefined> {
  try {
    const procs = await readFile(join(CGROUP_ROOT, "pids", cgroupsPath, "cgroup.procs"), "utf8");
    return procs.trim() !== "";
  } catch {
    return undefined;
  }
}

/** Whether the host has the v1 pids and freezer hierarchies (looked at once: they do not come and go). */
let v1StateFiles: boolean | undefined;

/**
 * A unit's state from its v1 pids and freezer cgroups, without starting runc (a process start of a
 * few milliseconds, on every checkpoint of a running unit): stopped without a task, paused when
 * frozen, else running, as `runc state` tells it. Undefined on a host without those hierarchies.
 */
export async function cgroupState(cgroupsPath: string): Promise<"running" | "paused" | "stopped" | undefined> {
  v1StateFiles ??= existsSync(join(CGROUP_ROOT, "pids", "cgroup.procs")) && existsSync(join(CGROUP_ROOT, "freezer"));
  if (!v1StateFiles) return undefined;
  const procs = await readFile(join(CGROUP_ROOT, "pids", cgroupsPath, "cgroup.procs"), "utf8").catch(() => "");
  if (procs.trim() === "") return "stopped";
  const freezer = await readFile(join(CGROUP_ROOT, "freezer", cgroupsPath, "freezer.state"), "utf8").catch(
    () => undefined,
  );
  if (freezer === undefined) return undefined;
  return freezer.trim() === "FROZEN" ? "paused" : "running";
}

// Read every second per running unit by the idle sweep: synchronously into one reused buffer
// (usage/kernel-files.ts), not through fs/promises, whose four thread-pool trips per file cost an
// idle server with many units a large share of a core (issue #16).
const kernel = new KernelFiles();

/** CPU time (cpuacct) of the cgroup's tasks; undefined when it is gone (the unit stopped). */
export function cgroupStats(cgroupsPath: string): UnitStats | undefined {
  const cpuNs = kernel.number(join(CGROUP_ROOT, "cpuacct", cgroupsPath, "cpuacct.usage"));
  return cpuNs === undefined ? undefined : { cpuNs };
}

/** Removes this runtime's (empty) parent cgroups; runc removes each unit's own on delete. */
export async function removeCgroups(rid: string): Promise<void> {
  let controllers: string[] = [];
  try {
    controllers = await readdir(CGROUP_ROOT);
  } catch {}
  for (const c of controllers) await rmdir(join(CGROUP_ROOT, c, `ums-${rid}`)).catch(() => {});
}
