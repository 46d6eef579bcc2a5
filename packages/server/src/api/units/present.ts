import type { Unit } from "@ums/protocol";
import type { ServerConfig } from "../../config.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";

/** Spec 2.1 / docs/ARCHITECTURE.md section 10: the URL that really works, from the server's public scheme and port. */
export function unitUrl(config: ServerConfig, listenPort: number, urlLabel: string): string {
  const defaultPort = config.unitUrlScheme === "https" ? 443 : 80;
  const actual = config.unitUrlPort ?? listenPort;
  const port = actual === defaultPort ? "" : `:${actual}`;
  return `${config.unitUrlScheme}://${urlLabel}.${config.unitHost}${port}`;
}

export function presentUnit(config: ServerConfig, listenPort: number, org: OrgRecord, u: UnitRecord): Unit {
  return {
    id: u.id,
    name: u.name,
    organization: org.slug,
    url: unitUrl(config, listenPort, u.urlLabel),
    status: u.status,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
    url_settings: u.privateAccess ? { auth: u.urlAuth, private_access: u.privateAccess } : { auth: u.urlAuth },
    ...(u.labels.length > 0 && { labels: [...u.labels] }),
    environment_version: u.environmentVersion,
    version: u.version,
    last_running_at: u.lastRunningAt,
    last_warming_at: u.lastWarmingAt,
  };
}
