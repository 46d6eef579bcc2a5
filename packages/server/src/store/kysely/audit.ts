import type { Kysely } from "kysely";
import type { AuditEvent } from "../records.js";
import type { AuditStore } from "../store.js";
import { prepared } from "./prepared.js";
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

type E = AuditEvent;
type Fields = [
  E["id"],
  E["at"],
  E["orgId"],
  E["tokenId"],
  E["method"],
  E["route"],
  E["unit"],
  E["status"],
  E["code"],
  E["ms"],
];

/** Issue #20: the audit log, one row per state-changing call. */
export function auditStore(db: Kysely<Database>): AuditStore {
  // Written after every state-changing call (an exec included): built and compiled once (prepared.ts).
  const insert = prepared(db, 10, (...v: Fields) =>
    db.insertInto("audit_events").values({
      id: v[0],
      at: v[1],
      org_id: v[2],
      token_id: v[3],
      method: v[4],
      route: v[5],
      unit: v[6],
      status: v[7],
      code: v[8],
      ms: v[9],
    }),
  );
  return {
    async add(e) {
      await insert(e.id, e.at, e.orgId, e.tokenId, e.method, e.route, e.unit, e.status, e.code, e.ms);
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
