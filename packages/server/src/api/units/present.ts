import { BASE_IMAGE_NAME, type ResourcesPolicy, type Unit, type UnitConfig } from "@ums/protocol";
import type { ServerConfig } from "../../config.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";

/** Spec 2.1 / docs/ARCHITECTURE.md section 10: the URL that really works, from the server's public scheme and port. */
export function unitUrl(config: ServerConfig, listenPort: number, urlLabel: string): string {
  const defaultPort = config.unitUrlScheme === "https" ? 443 : 80;
  const actual = config.unitUrlPort ?? listenPort;
  const port = actual === defaultPort ? "" : `:${actual}`;
  return `${config.unitUrlScheme}://${urlLabel}.${config.unitHost}${port}`;
}

/** The unit's size as the Sprites clients' `config`: its resources policy's memory and CPU, its disk. */
function unitConfig(u: UnitRecord): UnitConfig | undefined {
  const policy = JSON.parse(u.resources) as ResourcesPolicy;
  const config: UnitConfig = {
    ...(policy.memory && { ram_mb: policy.memory.limit_mb }),
    ...(policy.cpu && { cpus: policy.cpu.cores }),
    ...storageGb(policy, u),
  };
  return Object.keys(config).length > 0 ? config : undefined;
}

/** The policy's disk in whole GiB (a size in MiB that is not is shown by the resources policy only). */
function storageGb(policy: ResourcesPolicy, u: UnitRecord): { storage_gb?: number } {
  if (!policy.disk) return u.storageGb !== null ? { storage_gb: u.storageGb } : {};
  return policy.disk.limit_mb % 1024 === 0 ? { storage_gb: policy.disk.limit_mb / 1024 } : {};
}

/** `nodeName`: the name of the node that holds the unit (issue #15), when it names one. */
export function presentUnit(
  server: ServerConfig,
  listenPort: number,
  org: OrgRecord,
  u: UnitRecord,
  nodeName?: string,
): Unit {
  const config = unitConfig(u);
  return {
    id: u.id,
    name: u.name,
    organization: org.slug,
    url: unitUrl(server, listenPort, u.urlLabel),
    status: u.status,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
    url_settings: u.privateAccess ? { auth: u.urlAuth, private_access: u.privateAccess } : { auth: u.urlAuth },
    ...(u.labels.length > 0 && { labels: [...u.labels] }),
    ...(config && { config }),
    environment_version: u.environmentVersion,
    version: u.version,
    image: u.imageVersion ?? BASE_IMAGE_NAME,
    last_running_at: u.lastRunningAt,
    last_warming_at: u.lastWarmingAt,
    ...(nodeName !== undefined && { node: nodeName }),
  };
}
