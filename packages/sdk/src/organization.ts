import type { AuditList as WireAuditList, OrganizationInfo as WireOrganizationInfo } from "@ums/protocol";
import { type ClientOpts, resolveClient } from "./client.js";
import type { RequestOpts } from "./config.js";

/** The token's organization and its limits (spec 2.5). */
export interface Organization {
  slug: string;
  /** Whether the organization may create units. */
  unitsEnabled: boolean;
  /** Names of its active (running) units. */
  activeUnits: string[];
  /** Most units it may have. */
  maxUnits: number;
  /** Most units it may have running at once. */
  activeUnitLimit: number;
}

export interface OrganizationOpts extends ClientOpts, RequestOpts {}

/** The organization the token belongs to. */
export async function organization(opts: OrganizationOpts = {}): Promise<Organization> {
  const { organization: o } = await resolveClient(opts).request<WireOrganizationInfo>("GET", "/v1/organization", {
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
  });
  return {
    slug: o.slug,
    unitsEnabled: o.sprites_enabled,
    activeUnits: [...o.active_sprites],
    maxUnits: o.max_sprites,
    activeUnitLimit: o.active_sprite_limit,
  };
}

/** One state-changing call of the organization, as its audit log keeps it (issue #20). */
export interface AuditEvent {
  id: string;
  at: Date;
  tokenId: string | null;
  method: string;
  /** The route's pattern, e.g. `/v1/units/:name/exec`. */
  route: string;
  unit: string | null;
  /** The answer's status (101: a websocket opened). */
  status: number;
  /** The error code of a refused call. */
  code: string | null;
  ms: number;
}

export interface AuditLogOpts extends ClientOpts, RequestOpts {
  /** Events at or after this time. */
  since?: Date;
  /** Events older than this id (the `nextBefore` of the previous page). */
  before?: string;
  unit?: string;
  /** A token id (`tok_…`). */
  token?: string;
  /** 1 to 500 (default 100). */
  limit?: number;
}

/** The organization's audit log, newest first (admin tokens only: others get a 403). */
export async function auditLog(opts: AuditLogOpts = {}): Promise<{ events: AuditEvent[]; nextBefore: string | null }> {
  const client = resolveClient(opts);
  const { slug } = await organization(opts);
  const q = new URLSearchParams();
  if (opts.since) q.set("since", opts.since.toISOString());
  if (opts.before) q.set("before", opts.before);
  if (opts.unit) q.set("unit", opts.unit);
  if (opts.token) q.set("token", opts.token);
  if (opts.limit !== undefined) q.set("limit", String(opts.limit));
  const qs = q.toString();
  const r = await client.request<WireAuditList>(
    "GET",
    `/v1/organizations/${encodeURIComponent(slug)}/audit${qs ? `?${qs}` : ""}`,
    { timeoutMs: opts.timeoutMs, signal: opts.signal },
  );
  return {
    events: r.events.map((e) => ({
      id: e.id,
      at: new Date(e.at),
      tokenId: e.token_id,
      method: e.method,
      route: e.route,
      unit: e.unit,
      status: e.status,
      code: e.code,
      ms: e.ms,
    })),
    nextBefore: r.next_before,
  };
}
