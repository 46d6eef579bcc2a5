import type { Kysely } from "kysely";
import type { EventRecord, WebhookRecord } from "../records.js";
import type { EventStore, WebhookStore } from "../store.js";
import type { Database, EventsTable, WebhooksTable } from "./schema.js";

function eventFromRow(r: EventsTable): EventRecord {
  return Object.freeze({
    id: r.id,
    orgId: r.org_id,
    at: r.at,
    type: r.type,
    unit: r.unit,
    actor: r.actor,
    data: r.data,
  });
}

/** Issue #17: lifecycle events, one row each, read by organization in id order. */
export function eventStore(db: Kysely<Database>): EventStore {
  return {
    async add(e) {
      await db
        .insertInto("events")
        .values({ id: e.id, org_id: e.orgId, at: e.at, type: e.type, unit: e.unit, actor: e.actor, data: e.data })
        .execute();
    },
    async list(orgId, q) {
      let sel = db.selectFrom("events").selectAll().where("org_id", "=", orgId);
      if (q.after) sel = sel.where("id", ">", q.after);
      if (q.unit) sel = sel.where("unit", "=", q.unit);
      if (q.types && q.types.length > 0) sel = sel.where("type", "in", [...q.types]);
      const rows = await sel.orderBy("id", "asc").limit(q.limit).execute();
      return rows.map(eventFromRow);
    },
    async pruneBefore(at) {
      const r = await db.deleteFrom("events").where("at", "<", at).executeTakeFirst();
      return Number(r.numDeletedRows);
    },
    async pruneOrg(orgId, keep) {
      // The id of the newest event that goes (the keep+1-th newest), if there are that many.
      const edge = await db
        .selectFrom("events")
        .select("id")
        .where("org_id", "=", orgId)
        .orderBy("id", "desc")
        .offset(keep)
        .limit(1)
        .executeTakeFirst();
      if (!edge) return 0;
      const r = await db.deleteFrom("events").where("org_id", "=", orgId).where("id", "<=", edge.id).executeTakeFirst();
      return Number(r.numDeletedRows);
    },
    async orgIds() {
      const rows = await db.selectFrom("events").select("org_id").distinct().execute();
      return rows.map((r) => r.org_id);
    },
  };
}

function webhookFromRow(r: WebhooksTable): WebhookRecord {
  return Object.freeze({
    id: r.id,
    orgId: r.org_id,
    url: r.url,
    types: Object.freeze(JSON.parse(r.types) as string[]),
    secret: r.secret,
    keyVersion: Number(r.key_version),
    createdAt: r.created_at,
    lastStatus: r.last_status === null ? null : Number(r.last_status),
    lastError: r.last_error,
    lastAttemptAt: r.last_attempt_at,
    lastEventId: r.last_event_id,
  });
}

/** Issue #17: webhooks, scoped to their organization. */
export function webhookStore(db: Kysely<Database>): WebhookStore {
  return {
    async insert(w, max) {
      // The count and the insert in one transaction; the caller also serialises creates per
      // organization (SQLite transactions are serial; on PostgreSQL two creates could both pass).
      return db.transaction().execute(async (tx) => {
        const n = await tx
          .selectFrom("webhooks")
          .select((eb) => eb.fn.countAll<number | string>().as("n"))
          .where("org_id", "=", w.orgId)
          .executeTakeFirstOrThrow();
        if (Number(n.n) >= max) return false;
        await tx
          .insertInto("webhooks")
          .values({
            id: w.id,
            org_id: w.orgId,
            url: w.url,
            types: JSON.stringify(w.types),
            secret: w.secret,
            key_version: w.keyVersion,
            created_at: w.createdAt,
            last_status: null,
            last_error: null,
            last_attempt_at: null,
            last_event_id: null,
          })
          .execute();
        return true;
      });
    },
    async list(orgId) {
      const rows = await db
        .selectFrom("webhooks")
        .selectAll()
        .where("org_id", "=", orgId)
        .orderBy("created_at")
        .orderBy("id")
        .execute();
      return rows.map(webhookFromRow);
    },
    async get(orgId, id) {
      const r = await db
        .selectFrom("webhooks")
        .selectAll()
        .where("org_id", "=", orgId)
        .where("id", "=", id)
        .executeTakeFirst();
      return r && webhookFromRow(r);
    },
    async delete(orgId, id) {
      const r = await db.deleteFrom("webhooks").where("org_id", "=", orgId).where("id", "=", id).executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },
    async recordAttempt(id, a) {
      await db
        .updateTable("webhooks")
        .set({ last_status: a.status, last_error: a.error, last_attempt_at: a.at, last_event_id: a.eventId })
        .where("id", "=", id)
        .execute();
    },
  };
}
