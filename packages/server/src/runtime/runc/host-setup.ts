import { chmod, mkdir, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { subnetCidr } from "../network/addresses.js";
import { refuseSubnetConflicts } from "../network/conflicts.js";
import { installFirewall } from "../network/firewall.js";
import { guardSubnet } from "../network/subnet-guard.js";
import { enableUplinks } from "../network/uplinks.js";
import { CGROUP_ROOT } from "./cgroups.js";
import type { RuncRuntimeConfig } from "./config.js";
import { configureUnitsCpu, unitsCpuBudget } from "./cpu-share.js";
import type { UnitPaths } from "./unit-paths.js";

/** Gives every directory from `dir` up to / the search bit for others (o+x, not o+r). */
async function allowTraversal(dir: string): Promise<void> {
  for (let d = resolve(dir); ; d = dirname(d)) {
    const st = await stat(d);
    if ((st.mode & 0o001) === 0) await chmod(d, (st.mode & 0o7777) | 0o001);
    if (d === dirname(d)) break;
  }
}

/**
 * What the host needs before a unit runs on it: the units' parent cgroup with its CPU share and
 * total quota, the pool's and data dir's unit directories, the firewall, the subnet's guard route
 * and forwarding on the uplinks. Refuses a default CPU limit above what units may use here, and a
 * unit subnet that another ums server or a route of the host already uses (conflicts.ts).
 */
export async function prepareHost(cfg: RuncRuntimeConfig, paths: UnitPaths, hostCores: number): Promise<void> {
  const budget = unitsCpuBudget(hostCores);
  if (!(cfg.defaultCpuCores > 0 && cfg.defaultCpuCores <= budget)) {
    throw new Error(
      `a unit's default CPU limit of ${cfg.defaultCpuCores} cores is more than units may use on this host (${budget} of its ${hostCores} cores); pass a smaller --unit-cpu`,
    );
  }
  // Before anything is changed on the host: another server's subnet is not taken over.
  await refuseSubnetConflicts(cfg.rid, cfg.subnet);
  // Units are created below /ums-<rid>: its CPU share and total quota are in place first.
  await configureUnitsCpu(CGROUP_ROOT, cfg.rid, hostCores);
  await mkdir(paths.unitsDir, { recursive: true });
  await mkdir(paths.runRoot, { recursive: true });
  // runc mounts a unit's rootfs and binds from inside its user namespace, as the unit's root
  // (an unprivileged host uid): every directory above them must let it pass (o+x, not o+r).
  await allowTraversal(paths.unitsDir);
  await allowTraversal(paths.runRoot);
  await installFirewall(cfg.rid, {
    subnet: subnetCidr(cfg.subnet),
    gatewayPort: cfg.gatewayPort,
    egressRanges: cfg.egressRanges,
  });
  await guardSubnet(cfg.subnet);
  await enableUplinks(cfg.rid, cfg.dataDir, cfg.uplinks ?? []);
}
