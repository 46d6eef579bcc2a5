import { type RawBuilder, type SqlBool, sql } from "kysely";
import type {
  CheckpointRecord,
  CheckpointReplica,
  NewUnit,
  OrgRecord,
  PrivateAccess,
  TokenRecord,
  TokenRole,
  UnitRecord,
  UnitStatus,
  UrlAuth,
} from "../records.js";
import type { UnitCaller } from "../store.js";
import type { CheckpointsTable, OrgsTable, TokensTable, UnitsTable } from "./schema.js";

/**
 * An organization's columns selected beside its token's (the query joins `orgs`), named `org_*`:
 * the one list for every token lookup, read back by `joinedOrgFromRow` (a new column goes in both).
 */
export const JOINED_ORG_COLUMNS = [
  "orgs.slug as org_slug",
  "orgs.units_enabled as org_units_enabled",
  "orgs.max_units as org_max_units",
  "orgs.running_limit as org_running_limit",
  "orgs.warm_limit as org_warm_limit",
  "orgs.created_at as org_created_at",
] as const;

export function joinedOrgFromRow(r: {
  org_id: string;
  org_slug: string;
  org_units_enabled: OrgsTable["units_enabled"];
  org_max_units: OrgsTable["max_units"];
  org_running_limit: OrgsTable["running_limit"];
  org_warm_limit: OrgsTable["warm_limit"];
  org_created_at: string;
}): OrgRecord {
  return orgFromRow({
    id: r.org_id,
    slug: r.org_slug,
    units_enabled: r.org_units_enabled,
    max_units: r.org_max_units,
    running_limit: r.org_running_limit,
    warm_limit: r.org_warm_limit,
    created_at: r.org_created_at,
  });
}

export function orgFromRow(r: Omit<OrgsTable, "unit_count">): OrgRecord {
  return Object.freeze({
    id: r.id,
    slug: r.slug,
    unitsEnabled: Number(r.units_enabled) === 1,
    maxUnits: Number(r.max_units),
    runningLimit: Number(r.running_limit),
    warmLimit: Number(r.warm_limit),
    createdAt: r.created_at,
  });
}

export function tokenFromRow(r: TokensTable & { org_slug: string }): TokenRecord {
  return Object.freeze({
    id: r.id,
    orgId: r.org_id,
    orgSlug: r.org_slug,
    name: r.name,
    role: r.role as TokenRole,
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
    revokedAt: r.revoked_at,
    expiresAt: r.expires_at ?? null,
  });
}

/** A unit's `labels` column (a JSON array of strings), frozen. */
function labelsFromColumn(labels: string): readonly string[] {
  return Object.freeze(JSON.parse(labels) as string[]);
}

/** The gateway's caller (`units.callerById`) from the four columns it reads. */
export function callerFromRow(r: Pick<UnitsTable, "id" | "org_id" | "name" | "labels">): UnitCaller {
  return { id: r.id, orgId: r.org_id, name: r.name, labels: labelsFromColumn(r.labels) };
}

export function unitFromRow(r: UnitsTable): UnitRecord {
  return Object.freeze({
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    urlLabel: r.url_label,
    status: r.status as UnitStatus,
    urlAuth: r.url_auth as UrlAuth,
    privateAccess: r.private_access as PrivateAccess | null,
    labels: labelsFromColumn(r.labels),
    version: r.version,
    environmentVersion: r.environment_version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    lastRunningAt: r.last_running_at,
    lastWarmingAt: r.last_warming_at,
    resources: r.resources,
    privileges: r.privileges,
    network: r.network,
    activeCheckpoint: r.active_checkpoint,
    storageGb: r.storage_gb === null ? null : Number(r.storage_gb),
    waitForCapacity: Number(r.wait_for_capacity) === 1,
    imageId: r.image_id ?? null,
    imageVersion: r.image_version ?? null,
    nodeId: r.node_id ?? null,
  });
}

export function unitToRow(u: NewUnit): UnitsTable {
  return {
    id: u.id,
    org_id: u.orgId,
    name: u.name,
    url_label: u.urlLabel,
    status: u.status,
    url_auth: u.urlAuth,
    private_access: u.privateAccess,
    labels: JSON.stringify(u.labels),
    version: u.version,
    environment_version: u.environmentVersion,
    created_at: u.createdAt,
    updated_at: u.createdAt,
    last_running_at: null,
    last_warming_at: null,
    resources: u.resources ?? "{}",
    privileges: u.privileges ?? "{}",
    network: u.network ?? '{"rules":[]}',
    storage_gb: u.storageGb ?? null,
    wait_for_capacity: u.waitForCapacity ? 1 : 0,
    image_id: u.imageId ?? null,
    image_version: u.imageVersion ?? null,
    node_id: u.nodeId ?? null,
    active_checkpoint: null,
    checkpoint_seq: 0,
  };
}

export function checkpointFromRow(r: CheckpointsTable): CheckpointRecord {
  return Object.freeze({
    unitId: r.unit_id,
    id: r.id,
    seq: Number(r.seq),
    comment: r.comment,
    sourceId: r.source_id,
    resources: r.resources,
    privileges: r.privileges,
    network: r.network,
    createdAt: r.created_at,
    auto: Number(r.auto) === 1,
    replica: r.replica ? (Object.freeze(JSON.parse(r.replica)) as CheckpointReplica) : null,
  });
}

/** The first row a query finds, mapped to its record; undefined when there is none. */
export async function first<R, T>(query: { executeTakeFirst(): Promise<R | undefined> }, toRecord: (row: R) => T) {
  const row = await query.executeTakeFirst();
  return row && toRecord(row);
}

/** The columns a patch sets: each field the patch defines, under its column's name. */
export function patchColumns<P extends object>(patch: P, columns: { readonly [K in keyof P]?: string }) {
  const set: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(columns) as [keyof P, string][]) {
    if (patch[field] !== undefined) set[column] = patch[field];
  }
  return set;
}

/**
 * Issue #15: a `where` for the rows of node `nodeId` and those that name none (records.ts `onNode`),
 * in a query of one table with a `node_id` (units, templates, images).
 */
export function ofNode(nodeId: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`(${sql.ref("node_id")} = ${nodeId} or ${sql.ref("node_id")} is null)`;
}
