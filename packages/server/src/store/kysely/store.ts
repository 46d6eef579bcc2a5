import { randomUUID } from "node:crypto";
import type { Kysely } from "kysely";
import type { NewUnit, OrgLimits, OrgRecord, TokenRecord, UnitPageQuery, UnitPatch, UnitStatus } from "../records.js";
import type { CheckpointStore, EventFeed, NewToken, OrgStore, Store, TokenStore, UnitStore } from "../store.js";
import { UnitExistsError, UnitLimitError } from "../store.js";
import { auditStore } from "./audit.js";
import { type AuthGeneration, authGeneration } from "./auth-generation.js";
import { connectorStore } from "./connectors.js";
import { consoleSessionStore } from "./console-sessions.js";
import type { DialectAdapter } from "./dialect.js";
import { eventStore, webhookStore } from "./events.js";
import { imageStore } from "./images.js";
import { migrateToLatest } from "./migrations.js";
import { nodeStore } from "./nodes.js";
import { oauthStateStore } from "./oauth-states.js";
import { prepared } from "./prepared.js";
import {
  callerFromRow,
  checkpointFromRow,
  first,
  JOINED_ORG_COLUMNS,
  joinedOrgFromRow,
  ofNode,
  orgFromRow,
  patchColumns,
  tokenFromRow,
  unitFromRow,
  unitToRow,
} from "./rows.js";
import type { Database, UnitsTable } from "./schema.js";
import { templateStore } from "./templates.js";
import { deleteCounted, insertCounted } from "./unit-count.js";
import { usageStore } from "./usage.js";

/** The Store over any Kysely dialect; `adapter` supplies the few dialect-specific pieces. */
export function createKyselyStore(db: Kysely<Database>, adapter: DialectAdapter, feed?: EventFeed): Store {
  const generation = authGeneration(db, adapter, feed);
  return Object.freeze({
    dialect: adapter.name,
    ...(feed && { feed }),
    orgs: orgStore(db, generation),
    tokens: tokenStore(db, adapter, generation),
    units: unitStore(db, adapter),
    checkpoints: checkpointStore(db),
    templates: templateStore(db, adapter),
    images: imageStore(db, adapter),
    connectors: connectorStore(db),
    oauthStates: oauthStateStore(db),
    audit: auditStore(db),
    consoleSessions: consoleSessionStore(db),
    events: eventStore(db, adapter),
    webhooks: webhookStore(db, adapter),
    usage: usageStore(db),
    nodes: nodeStore(db, adapter),
    migrate: () => migrateToLatest(db as Kysely<unknown>),
    close: async () => {
      await feed?.close();
      await db.destroy();
    },
  });
}

function orgStore(db: Kysely<Database>, generation: AuthGeneration): OrgStore {
  const bySlug = async (slug: string) => {
    return first(db.selectFrom("orgs").selectAll().where("slug", "=", slug), orgFromRow);
  };
  const byId = prepared(db, 1, (id: string) => db.selectFrom("orgs").selectAll().where("id", "=", id));
  return {
    async ensure(slug: string, limits: OrgLimits) {
      await db
        .insertInto("orgs")
        .values({
          id: `org-${randomUUID()}`,
          slug,
          units_enabled: 1,
          max_units: limits.maxUnits,
          running_limit: limits.runningLimit,
          warm_limit: limits.warmLimit,
          created_at: new Date().toISOString(),
        })
        .onConflict((oc) => oc.column("slug").doNothing())
        .execute();
      const org = await bySlug(slug);
      if (!org) throw new Error(`organization '${slug}' vanished while being created`);
      return org;
    },
    getBySlug: bySlug,
    async getById(id) {
      const [row] = await byId(id);
      return row && orgFromRow(row);
    },
    async list() {
      const rows = await db.selectFrom("orgs").selectAll().orderBy("slug").execute();
      return rows.map(orgFromRow);
    },
    async setLimits(slug, limits) {
      const set = {
        ...(limits.maxUnits !== undefined && { max_units: limits.maxUnits }),
        ...(limits.runningLimit !== undefined && { running_limit: limits.runningLimit }),
        ...(limits.warmLimit !== undefined && { warm_limit: limits.warmLimit }),
      };
      if (Object.keys(set).length > 0) {
        // Kept token lookups carry their organization's limits: they are read again.
        await generation.change(async (trx) => {
          await trx.updateTable("orgs").set(set).where("slug", "=", slug).execute();
          return true;
        });
      }
      return bySlug(slug);
    },
  };
}

/** At most this many token lookups are kept (a lookup that found nothing is never kept). */
const KEPT_TOKENS = 10_000;

function tokenStore(db: Kysely<Database>, adapter: DialectAdapter, generation: AuthGeneration): TokenStore {
  const withOrg = () =>
    db
      .selectFrom("tokens")
      .innerJoin("orgs", "orgs.id", "tokens.org_id")
      .selectAll("tokens")
      .select("orgs.slug as org_slug");
  // Every request asks (spec section 5): built once.
  const byHash = prepared(db, 1, (hash: string) =>
    db
      .selectFrom("tokens")
      .innerJoin("orgs", "orgs.id", "tokens.org_id")
      .selectAll("tokens")
      .select(JOINED_ORG_COLUMNS)
      .where("tokens.token_hash", "=", hash)
      .where("tokens.revoked_at", "is", null),
  );
  // Issue #16 part 2: lookups kept by token hash, each good while the generation it was read
  // under holds (auth-generation.ts): a revoke or an organization's change moves it.
  const kept = new Map<string, { readonly gen: string; readonly found: { token: TokenRecord; org: OrgRecord } }>();
  const keep = (hash: string, gen: string, found: { token: TokenRecord; org: OrgRecord }) => {
    kept.delete(hash);
    if (kept.size >= KEPT_TOKENS) kept.delete(kept.keys().next().value as string);
    kept.set(hash, { gen, found });
  };
  return {
    async create(t: NewToken) {
      await db
        .insertInto("tokens")
        .values({
          id: t.id,
          org_id: t.orgId,
          name: t.name,
          role: t.role,
          token_hash: t.hash,
          created_at: t.createdAt,
          expires_at: t.expiresAt ?? null,
        })
        .execute();
      const row = await withOrg().where("tokens.id", "=", t.id).executeTakeFirstOrThrow();
      return tokenFromRow(row);
    },
    async authenticate(hash) {
      // Read before the lookup: a change after it moves the generation past what is kept.
      const gen = await generation.current();
      const hit = kept.get(hash);
      if (hit && gen !== undefined && hit.gen === gen) return hit.found;
      const [row] = await byHash(hash);
      if (!row) {
        kept.delete(hash);
        return undefined;
      }
      const found = Object.freeze({ token: tokenFromRow(row), org: joinedOrgFromRow(row) });
      if (gen !== undefined) keep(hash, gen, found);
      return found;
    },
    async list(orgId) {
      let q = withOrg().orderBy("orgs.slug").orderBy("tokens.created_at").orderBy("tokens.id");
      if (orgId) q = q.where("tokens.org_id", "=", orgId);
      return (await q.execute()).map(tokenFromRow);
    },
    async revoke(id, at) {
      return generation.change(async (trx) => {
        const r = await trx
          .updateTable("tokens")
          .set({ revoked_at: at })
          .where("id", "=", id)
          .where("revoked_at", "is", null)
          .executeTakeFirst();
        return Number(r.numUpdatedRows) > 0;
      });
    },
    async revokeInOrg(orgId, id, at) {
      let outcome: "revoked" | "not_found" | "last_admin" = "not_found";
      await generation.change(async (trx) => {
        // Two admins revoking each other at once: the second one sees the first's revoke.
        await adapter.lockOrg(trx, orgId);
        const live = await trx
          .selectFrom("tokens")
          .select(["id", "role"])
          .where("org_id", "=", orgId)
          .where("revoked_at", "is", null)
          .execute();
        const target = live.find((t) => t.id === id);
        if (!target) return false;
        if (target.role === "admin" && !live.some((t) => t.id !== id && t.role === "admin")) {
          outcome = "last_admin";
          return false;
        }
        await trx.updateTable("tokens").set({ revoked_at: at }).where("id", "=", id).execute();
        outcome = "revoked";
        return true;
      });
      return outcome;
    },
    async touch(id, at) {
      await db.updateTable("tokens").set({ last_used_at: at }).where("id", "=", id).execute();
    },
  };
}

function checkpointStore(db: Kysely<Database>): CheckpointStore {
  return {
    async nextSeq(unitId) {
      // One statement, so two callers can never get the same number.
      const row = await db
        .updateTable("units")
        .set((eb) => ({ checkpoint_seq: eb("checkpoint_seq", "+", 1) }))
        .where("id", "=", unitId)
        .returning("checkpoint_seq")
        .executeTakeFirstOrThrow();
      return Number(row.checkpoint_seq) - 1;
    },
    async insert(cp) {
      await db
        .insertInto("checkpoints")
        .values({
          unit_id: cp.unitId,
          id: cp.id,
          seq: cp.seq,
          comment: cp.comment,
          source_id: cp.sourceId,
          resources: cp.resources,
          privileges: cp.privileges,
          network: cp.network,
          created_at: cp.createdAt,
          auto: cp.auto ? 1 : 0,
          replica: cp.replica ? JSON.stringify(cp.replica) : null,
        })
        .execute();
    },
    async setReplica(unitId, id, replica) {
      const r = await db
        .updateTable("checkpoints")
        .set({ replica: replica ? JSON.stringify(replica) : null })
        .where("unit_id", "=", unitId)
        .where("id", "=", id)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
    async unreplicated(nodeId) {
      let query = db.selectFrom("checkpoints").selectAll().where("replica", "is not", null);
      if (nodeId !== undefined) {
        query = query.where("unit_id", "in", db.selectFrom("units").select("id").where(ofNode(nodeId)));
      }
      const rows = await query.orderBy("unit_id").orderBy("seq").execute();
      return rows.map(checkpointFromRow).filter((c) => c.replica && c.replica.state !== "replicated");
    },
    async list(unitId) {
      const rows = await db
        .selectFrom("checkpoints")
        .selectAll()
        .where("unit_id", "=", unitId)
        .orderBy("seq")
        .execute();
      return rows.map(checkpointFromRow);
    },
    async get(unitId, id) {
      return first(
        db
          .selectFrom("checkpoints")
          .selectAll()
          .where((eb) => eb.and({ unit_id: unitId, id })),
        checkpointFromRow,
      );
    },
    async delete(unitId, id) {
      const r = await db
        .deleteFrom("checkpoints")
        .where((eb) => eb.and({ unit_id: unitId, id }))
        .executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },
  };
}

/** Where each field of a unit patch is stored (`labels` is stored as JSON). */
const UNIT_PATCH_COLUMNS = {
  updatedAt: "updated_at",
  resources: "resources",
  activeCheckpoint: "active_checkpoint",
  privileges: "privileges",
  network: "network",
  urlAuth: "url_auth",
  privateAccess: "private_access",
  version: "version",
  environmentVersion: "environment_version",
  status: "status",
  lastRunningAt: "last_running_at",
  lastWarmingAt: "last_warming_at",
  imageId: "image_id",
  imageVersion: "image_version",
} as const satisfies { readonly [K in Exclude<keyof UnitPatch, "labels">]-?: keyof UnitsTable };

function unitStore(db: Kysely<Database>, adapter: DialectAdapter): UnitStore {
  // The unit of nearly every request, by name, by id or by its URL's label: built once.
  const byName = prepared(db, 2, (orgId: string, name: string) =>
    db.selectFrom("units").selectAll().where("org_id", "=", orgId).where("name", "=", name),
  );
  const byId = prepared(db, 1, (id: string) => db.selectFrom("units").selectAll().where("id", "=", id));
  // Every gateway call: four columns instead of the row's 24 (a third of the read's time, and no
  // JSON of the unit's policies to parse).
  const callerOf = prepared(db, 1, (id: string) =>
    db.selectFrom("units").select(["id", "org_id", "name", "labels"]).where("id", "=", id),
  );
  const byLabel = prepared(db, 1, (label: string) => db.selectFrom("units").selectAll().where("url_label", "=", label));
  const get = async (orgId: string, name: string) => {
    const [row] = await byName(orgId, name);
    return row && unitFromRow(row);
  };
  return {
    async create(unit: NewUnit, maxUnits: number) {
      const row = unitToRow(unit);
      let counted: boolean;
      try {
        counted = await insertCounted(db, adapter, row, maxUnits);
      } catch (err) {
        if (adapter.isUniqueViolation(err) && (await get(unit.orgId, unit.name))) {
          throw new UnitExistsError(unit.name);
        }
        throw err;
      }
      if (!counted) throw new UnitLimitError(maxUnits);
      return unitFromRow(row);
    },
    get,
    async getById(id) {
      const [row] = await byId(id);
      return row && unitFromRow(row);
    },
    async callerById(id) {
      const [row] = await callerOf(id);
      return row && callerFromRow(row);
    },
    async withStatus(statuses, nodeId) {
      if (statuses.length === 0) return [];
      let query = db
        .selectFrom("units")
        .selectAll()
        .where("status", "in", [...statuses]);
      if (nodeId !== undefined) query = query.where(ofNode(nodeId));
      return (await query.execute()).map(unitFromRow);
    },
    async countOnOtherNodes(orgId, status, nodeId, upSince) {
      const row = await db
        .selectFrom("units")
        .innerJoin("nodes", "nodes.id", "units.node_id")
        .select((eb) => eb.fn.countAll<number | string>().as("n"))
        .where("units.org_id", "=", orgId)
        .where("units.status", "=", status)
        .where("units.node_id", "<>", nodeId)
        .where("nodes.heartbeat_at", ">=", upSince)
        .executeTakeFirst();
      return Number(row?.n ?? 0);
    },
    async getByUrlLabel(label) {
      const [row] = await byLabel(label);
      return row && unitFromRow(row);
    },
    async page(orgId: string, q: UnitPageQuery) {
      let query = db.selectFrom("units").selectAll().where("org_id", "=", orgId);
      // Prefixes are validated to [a-z0-9-], so LIKE needs no escaping.
      if (q.prefix) query = query.where("name", "like", `${q.prefix}%`);
      if (q.after !== undefined) query = query.where("name", ">", q.after);
      const rows = await query.orderBy("name").limit(q.limit).execute();
      return rows.map(unitFromRow);
    },
    async namesWithStatus(orgId: string, status: UnitStatus) {
      const rows = await db
        .selectFrom("units")
        .select("name")
        .where((eb) => eb.and({ org_id: orgId, status }))
        .orderBy("name")
        .execute();
      return rows.map((r) => r.name);
    },
    async update(orgId: string, name: string, p: UnitPatch) {
      const set = patchColumns(p, UNIT_PATCH_COLUMNS) as Partial<UnitsTable>;
      if (p.labels !== undefined) set.labels = JSON.stringify(p.labels);
      const r = await db
        .updateTable("units")
        .set(set)
        .where((eb) => eb.and({ org_id: orgId, name }))
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0 ? get(orgId, name) : undefined;
    },
    async moveTo(id, from, to, activeCheckpoint) {
      const r = await db
        .updateTable("units")
        .set({ node_id: to, active_checkpoint: activeCheckpoint, status: "cold" })
        .where("id", "=", id)
        .where("node_id", "=", from)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
    async rehome(id, from, to, activeCheckpoint, downBefore) {
      return db.transaction().execute(async (trx) => {
        const r = await trx
          .updateTable("units")
          .set({ node_id: to, active_checkpoint: activeCheckpoint, status: "cold" })
          .where("id", "=", id)
          .where("node_id", "=", from)
          .where((eb) =>
            eb.exists(
              eb.selectFrom("nodes").select("id").where("id", "=", from).where("heartbeat_at", "<", downBefore),
            ),
          )
          .executeTakeFirst();
        if (Number(r.numUpdatedRows) === 0) return false;
        await trx
          .insertInto("rehomed_units")
          .values({ node_id: from, unit_id: id })
          .onConflict((oc) => oc.columns(["node_id", "unit_id"]).doNothing())
          .execute();
        return true;
      });
    },
    async delete(orgId, name) {
      return deleteCounted(db, adapter, orgId, name);
    },
  };
}
