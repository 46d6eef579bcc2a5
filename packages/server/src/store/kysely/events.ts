import { type Kysely, sql, type Transaction } from "kysely";
import { eventIdAfter } from "../../events/event-id.js";
import type { EventRecord, WebhookRecord } from "../records.js";
import type { EventStore, WebhookStore } from "../store.js";
import type { DialectAdapter } from "./dialect.js";
import type { Database, EventsTable, WebhooksTable } from "./schema.js";

/** PostgreSQL channels of the feed (store/postgres/event-feed.ts). */
export const EVENTS_CHANNEL = "ums_events";
export const WEBHOOKS_CHANNEL = "ums_webhooks";
/** A NOTIFY payload must stay under 8000 bytes; a larger event is sent by its id. */
const MAX_PAYLOAD = 7000;

/** What an event's notification carries: the event, or (too large) where to read it. */
export type EventNotice = { e: EventRecord } | { id: string };

/**
 * A transaction-scoped lock on one organization's events (or webhooks): the writers of several
 * processes take turns, so an organization's commits come in id order.
 */
async function lockOrgEvents(tx: Transaction<Database>, what: string, orgId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`ums.${what}.${orgId}`}, 0))`.execute(tx);
}

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

const eventRow = (e: EventRecord) => ({
  id: e.id,
  org_id: e.orgId,
  at: e.at,
  type: e.type,
  unit: e.unit,
  actor: e.actor,
  data: e.data,
});

/** Issue #17: lifecycle events, one row each, read by organization in id order. */
export function eventStore(db: Kysely<Database>, adapter: DialectAdapter): EventStore {
  return {
    async add(e) {
      if (adapter.name !== "postgres") {
        await db.insertInto("events").values(eventRow(e)).execute();
        return e;
      }
      // Issue #15: several processes record an organization's events. They take turns (the lock),
      // each id is larger than the last one recorded, and the notification goes with the commit:
      // listeners hear an organization's events in id order.
      const noticeOf = (rec: EventRecord) => {
        const notice = JSON.stringify({ e: rec } satisfies EventNotice);
        return Buffer.byteLength(notice) > MAX_PAYLOAD ? JSON.stringify({ id: rec.id } satisfies EventNotice) : notice;
      };
      return db.transaction().execute(async (tx) => {
        await lockOrgEvents(tx, "events", e.orgId);
        // Its own id when none recorded is as large (the usual case): the insert and its notice in
        // one statement, whose snapshot, taken after the lock, sees every earlier writer's commit.
        const mine = await sql`
          with ins as (
            insert into events (id, org_id, at, type, unit, actor, data)
            select ${e.id}, ${e.orgId}, ${e.at}, ${e.type}, ${e.unit}, ${e.actor}, ${e.data}
            where not exists (select 1 from events where org_id = ${e.orgId} and id >= ${e.id})
            returning id
          )
          select pg_notify(${EVENTS_CHANNEL}, ${noticeOf(e)}) from ins`.execute(tx);
        if (mine.rows.length === 1) return e;
        const last = await tx
          .selectFrom("events")
          .select("id")
          .where("org_id", "=", e.orgId)
          .orderBy("id", "desc")
          .limit(1)
          .executeTakeFirst();
        const rec = last && last.id >= e.id ? Object.freeze({ ...e, id: eventIdAfter(last.id) }) : e;
        await tx.insertInto("events").values(eventRow(rec)).execute();
        await sql`select pg_notify(${EVENTS_CHANNEL}, ${noticeOf(rec)})`.execute(tx);
        return rec;
      });
    },
    async get(id) {
      const r = await db.selectFrom("events").selectAll().where("id", "=", id).executeTakeFirst();
      return r && eventFromRow(r);
    },
    async recent(at, limit) {
      const rows = await db.selectFrom("events").selectAll().where("at", ">=", at).orderBy("id").limit(limit).execute();
      return rows.map(eventFromRow);
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

/** Issue #15: the feed's listeners hear that an organization's webhooks changed (PostgreSQL). */
async function notifyWebhooks(tx: Transaction<Database>, adapter: DialectAdapter, orgId: string): Promise<void> {
  if (adapter.name === "postgres") await sql`select pg_notify(${WEBHOOKS_CHANNEL}, ${orgId})`.execute(tx);
}

/** Issue #17: webhooks, scoped to their organization. */
export function webhookStore(db: Kysely<Database>, adapter: DialectAdapter): WebhookStore {
  return {
    async insert(w, max) {
      // The count and the insert in one transaction (SQLite's are serial); on PostgreSQL the
      // organization's creates take turns, also across processes (issue #15).
      return db.transaction().execute(async (tx) => {
        if (adapter.name === "postgres") await lockOrgEvents(tx, "webhooks", w.orgId);
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
        await notifyWebhooks(tx, adapter, w.orgId);
        return true;
      });
    },
    async listAll() {
      const rows = await db.selectFrom("webhooks").selectAll().orderBy("created_at").orderBy("id").execute();
      return rows.map(webhookFromRow);
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
      return db.transaction().execute(async (tx) => {
        const r = await tx.deleteFrom("webhooks").where("org_id", "=", orgId).where("id", "=", id).executeTakeFirst();
        if (Number(r.numDeletedRows) === 0) return false;
        await notifyWebhooks(tx, adapter, orgId);
        return true;
      });
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
