import type { Kysely } from "kysely";
import type { AuditEvent } from "../records.js";
import type { AuditStore } from "../store.js";
import type { AuditEventsTable, Database } from "./schema.js";

function fromRow(r: AuditEventsTable): AuditEvent {
  return Object.freeze({
    id: r.id,
    at: r.at,
    orgId: r.org_id,
    tokenId: r.token_id,
    method: r.method,
    route: r.route,
    unit: r.unit,
    status: Number(r.status),
    code: r.code,
    ms: Number(r.ms),
  });
}

/** Issue #20: the audit log, one row per state-changing call. */
export function auditStore(db: Kysely<Database>): AuditStore {
  return {
    async add(e) {
      await db
        .insertInto("audit_events")
        .values({
          id: e.id,
          at: e.at,
          org_id: e.orgId,
          token_id: e.tokenId,
          method: e.method,
          route: e.route,
          unit: e.unit,
          status: e.status,
          code: e.code,
          ms: e.ms,
        })
        .execute();
    },
    async list(orgId, q) {
      let sel = db.selectFrom("audit_events").selectAll().where("org_id", "=", orgId);
      if (q.since) sel = sel.where("at", ">=", q.since);
      if (q.before) sel = sel.where("id", "<", q.before);
      if (q.unit) sel = sel.where("unit", "=", q.unit);
      if (q.tokenId) sel = sel.where("token_id", "=", q.tokenId);
      const rows = await sel.orderBy("id", "desc").limit(q.limit).execute();
      return rows.map(fromRow);
    },
    async prune(at) {
      const r = await db.deleteFrom("audit_events").where("at", "<", at).executeTakeFirst();
      return Number(r.numDeletedRows);
    },
  };
}
