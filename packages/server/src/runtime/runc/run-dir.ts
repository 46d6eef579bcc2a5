import { chmod, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { UnitPaths } from "./unit-paths.js";

/**
 * Readies a stopped unit's run dir for a boot: the dir itself (0711: runc, as the unit's root,
 * passes through it), the host-owned directory the unit sees at /.unit/run, and no stale agent
 * socket. No process of the unit runs, so nothing can race the removals.
 */
export async function prepareRunDir(paths: UnitPaths, id: string): Promise<void> {
  const unit = paths.unit(id);
  await mkdir(unit.run, { recursive: true, mode: 0o711 });
  // Before 0.2 the unit's root owned <run>/sock (its sockets' dir).
  await rm(join(unit.run, "sock"), { recursive: true, force: true });
  await mkdir(unit.exposed, { recursive: true, mode: 0o755 });
  await chmod(unit.exposed, 0o755);
  await rm(unit.agentSocket, { force: true });
}

/** The unit's /etc/resolv.conf: its resolver at the host end of its link. Returns its host path. */
export async function writeResolvConf(paths: UnitPaths, id: string, hostIp: string): Promise<string> {
  const resolvConf = join(paths.unit(id).run, "resolv.conf");
  await writeFile(resolvConf, `# ums: the unit's resolver (its network policy applies)\nnameserver ${hostIp}\n`, {
    mode: 0o644,
  });
  return resolvConf;
}

/** The directory the unit sees read-only at /.unit/policy. */
export function policyDir(paths: UnitPaths, id: string): string {
  return join(paths.unit(id).run, "policy");
}

/** Written beside the files the unit sees, then renamed in: a reader never sees half a file. */
async function publishPolicyFile(paths: UnitPaths, id: string, name: string, text: string): Promise<void> {
  const dir = policyDir(paths, id);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await writeFile(join(dir, `.${name}.tmp`), text, { mode: 0o644 });
  await rename(join(dir, `.${name}.tmp`), join(dir, name));
}

export async function publishNetworkPolicy(paths: UnitPaths, id: string, json: string): Promise<void> {
  await publishPolicyFile(paths, id, "network.json", `${json}\n`);
}

/**
 * `/.unit/policy/disk`: the unit's quota group in sysfs, whose limit and usage the unit's statfs
 * library shows as its disk (agent/src/native/statfs-quota.c). Absent while quotas are off.
 */
export async function publishDiskGroup(paths: UnitPaths, id: string, sysfsDir: string | undefined): Promise<void> {
  if (sysfsDir) await publishPolicyFile(paths, id, "disk", `${sysfsDir}\n`);
  else await rm(join(policyDir(paths, id), "disk"), { force: true });
}
