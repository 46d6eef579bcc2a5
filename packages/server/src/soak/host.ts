// What the host holds for one `ums serve` (its runtime id) and its units: the host processes of a
// unit (found by cgroup, as the fs transfer test does) and the resources left after a run, with the
// checks of /work/shared/tools/ums-host-state and testing/host-cleanup.ts scoped to one server.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "../runtime/exec/host-command.js";
import { firewallTable } from "../runtime/network/firewall.js";

export interface UnitProcess {
  readonly pid: number;
  /** The pid inside the unit's pid namespace (1 is the unit's init). */
  readonly nsPid: number;
  readonly cmdline: string;
}

/** The host processes in a unit's cgroup, zombies left out. */
export function unitProcesses(unitId: string): UnitProcess[] {
  const out: UnitProcess[] = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (!readFileSync(`/proc/${p}/cgroup`, "utf8").includes(`/${unitId}`)) continue;
      const status = readFileSync(`/proc/${p}/status`, "utf8");
      // A zombie is not the unit's: a restore's old container init stays one, with pid 1 in the
      // unit, until the host's PID 1 reaps it (its parent), and must not pass for the unit's PID 1.
      if (/^State:\s+Z/m.test(status)) continue;
      const nsPid = Number(/^NSpid:.*\s(\d+)\s*$/m.exec(status)?.[1] ?? 0);
      const cmdline = readFileSync(`/proc/${p}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      out.push({ pid: Number(p), nsPid, cmdline });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The unit's agent (`/.unit/bin/node /.unit/agent…`) and its PID 1, as host pids. */
export function unitAgentPid(unitId: string): number | undefined {
  return unitProcesses(unitId).find((p) => p.nsPid !== 1 && /^\/\.unit\/bin\/node \/\.unit\/agent/.test(p.cmdline))
    ?.pid;
}
export function unitInitPid(unitId: string): number | undefined {
  return unitProcesses(unitId).find((p) => p.nsPid === 1)?.pid;
}

/** Resident memory of a process in bytes (0 once it is gone). */
export function rssOf(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/**
 * What is left on the host of the units `unitIds` (ever made by this server) and, with
 * `server: true`, of the server itself (its firewall table and parent cgroups, which a stopped server
 * keeps on purpose so that its units survive a restart). Each entry names one leftover.
 */
export async function hostLeftovers(o: {
  readonly rid: string;
  readonly dataDir: string;
  readonly poolDir: string;
  readonly unitIds: Iterable<string>;
  readonly server: boolean;
}): Promise<string[]> {
  const left: string[] = [];
  const ids = [...o.unitIds];
  const lines = async (cmd: string, args: string[]) =>
    (await run(cmd, args).catch(() => ({ stdout: "" }))).stdout.split("\n").filter(Boolean);
  for (const l of await lines("ip", ["netns", "list"])) if (l.startsWith(`ums${o.rid}-`)) left.push(`netns ${l}`);
  for (const l of await lines("ip", ["-br", "link"]))
    if (l.startsWith(`u${o.rid}`)) left.push(`veth ${l.split(/\s+/)[0]}`);
  for (const l of await lines("ip", ["route"])) if (l.includes(`dev u${o.rid}`)) left.push(`route ${l}`);
  for (const l of await lines("mount", []))
    if (l.includes(` ${o.dataDir}/`) || ids.some((id) => l.includes(`/units/${id}/`))) left.push(`mount ${l}`);
  for (const id of ids) {
    if (existsSync(join(o.poolDir, "units", id))) left.push(`disk ${join(o.poolDir, "units", id)}`);
    for (const p of unitProcesses(id)) left.push(`process ${p.pid} of ${id}: ${p.cmdline}`);
  }
  const cgroupRoots = ["/sys/fs/cgroup", ...readdirSync("/sys/fs/cgroup").map((c) => join("/sys/fs/cgroup", c))];
  for (const root of cgroupRoots) {
    const dir = join(root, `ums-${o.rid}`);
    if (!existsSync(dir)) continue;
    if (o.server) left.push(`cgroup ${dir}`);
    else
      for (const e of readdirSync(dir, { withFileTypes: true }))
        if (e.isDirectory() && ids.some((id) => e.name.includes(id))) left.push(`cgroup ${join(dir, e.name)}`);
  }
  const runcState = existsSync(join(o.dataDir, "runc")) ? readdirSync(join(o.dataDir, "runc")) : [];
  for (const id of runcState.filter((e) => ids.includes(e))) left.push(`runc state ${id}`);
  if (o.server && (await lines("nft", ["list", "tables"])).some((l) => l.endsWith(` ${firewallTable(o.rid)}`)))
    left.push(`nft table ${firewallTable(o.rid)}`);
  return left;
}
