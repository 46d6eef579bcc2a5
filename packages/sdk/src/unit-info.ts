import type {
  UnitStatus,
  HealthCheck as WireHealthCheck,
  Unit as WireUnit,
  UrlSettings as WireUrlSettings,
  UrlSettingsRequest as WireUrlSettingsRequest,
} from "@ums/protocol";

export type { UnitStatus };

/** Who may reach a unit's own URL (spec 2.2). */
export interface UrlSettings {
  /** `unit`: the URL requires unit authentication; `public`: open to anyone. */
  auth: "unit" | "public";
  /** With auth `unit`, narrows who may use the URL. */
  privateAccess?: "admins" | "organization";
}

/**
 * New URL settings. They replace the current ones: an omitted `auth` becomes `unit` and an
 * omitted `privateAccess` is cleared, as the server does.
 */
export interface UrlSettingsUpdate {
  auth?: "unit" | "public";
  privateAccess?: "admins" | "organization" | null;
}

/** A unit's fields (spec 2.1), in SDK naming. */
export interface UnitInfo {
  /** `unit-<uuid>`. */
  id: string;
  name: string;
  /** Organization slug. */
  organization: string;
  /** The unit's own HTTP endpoint. */
  url: string;
  status: UnitStatus;
  createdAt: Date;
  updatedAt: Date;
  urlSettings: UrlSettings | null;
  labels: string[];
  environmentVersion: string | null;
  version: string | null;
  /** The image it was created from (issue #18): `base`, or an organization image's `<name>@<id>`. */
  image: string;
  lastRunningAt: Date | null;
  lastWarmingAt: Date | null;
  /** The name of the node (host) that holds the unit (issue #15); null when it names none. */
  node: string | null;
}

/** Result of `unit.check()` (spec 2.4). */
export interface UnitHealth {
  unitName: string;
  unitId: string;
  /** `healthy`, `hibernated` (not running), `unhealthy` (not responding) or `error`. */
  status: WireHealthCheck["status"];
  reason: string | null;
  checkedAt: Date;
  /** How long the check took on the server. */
  elapsedMs: number;
}

/** Result of `unit.upgrade()`. */
export interface UpgradeResult {
  name: string;
  /** `upgraded` when the unit's version changed, `up_to_date` when it already had it. */
  status: "upgraded" | "up_to_date";
}

const date = (s: string) => new Date(s);
const dateOrNull = (s: string | null | undefined) => (s ? new Date(s) : null);

export function urlSettingsFromWire(s: WireUrlSettings | null | undefined): UrlSettings | null {
  if (!s) return null;
  return s.private_access ? { auth: s.auth, privateAccess: s.private_access } : { auth: s.auth };
}

export function urlSettingsToWire(s: UrlSettingsUpdate): WireUrlSettingsRequest {
  return {
    ...(s.auth !== undefined && { auth: s.auth }),
    ...(s.privateAccess !== undefined && { private_access: s.privateAccess }),
  };
}

export function unitInfoFromWire(u: WireUnit): UnitInfo {
  return {
    id: u.id,
    name: u.name,
    organization: u.organization,
    url: u.url,
    status: u.status,
    createdAt: date(u.created_at),
    updatedAt: date(u.updated_at),
    urlSettings: urlSettingsFromWire(u.url_settings),
    labels: [...(u.labels ?? [])],
    environmentVersion: u.environment_version ?? null,
    version: u.version ?? null,
    image: u.image ?? "base",
    lastRunningAt: dateOrNull(u.last_running_at),
    lastWarmingAt: dateOrNull(u.last_warming_at),
    node: u.node ?? null,
  };
}

export function healthFromWire(h: WireHealthCheck): UnitHealth {
  return {
    unitName: h.unit_name,
    unitId: h.unit_id,
    status: h.status,
    reason: h.reason,
    checkedAt: date(h.checked_at),
    elapsedMs: h.elapsed,
  };
}
