import type { Kysely } from "kysely";
import type { TemplateRecord } from "../records.js";
import { TemplateExistsError, type TemplateStore } from "../store.js";
import type { DialectAdapter } from "./dialect.js";
import { ofNode } from "./rows.js";
import type { Database, TemplatesTable } from "./schema.js";

function fromRow(r: TemplatesTable): TemplateRecord {
  return Object.freeze({
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    description: r.description,
    sourceUnit: r.source_unit,
    sourceCheckpoint: r.source_checkpoint,
    environmentVersion: r.environment_version,
    resources: r.resources,
    privileges: r.privileges,
    network: r.network,
    imageId: r.image_id ?? null,
    ready: Number(r.ready) === 1,
    createdAt: r.created_at,
    nodeId: r.node_id ?? null,
  });
}

/** Issue #18: organization templates. */
export function templateStore(db: Kysely<Database>, adapter: DialectAdapter): TemplateStore {
  return {
    async insert(t) {
      try {
        await db
          .insertInto("templates")
          .values({
            id: t.id,
            org_id: t.orgId,
            name: t.name,
            description: t.description,
            source_unit: t.sourceUnit,
            source_checkpoint: t.sourceCheckpoint,
            environment_version: t.environmentVersion,
            resources: t.resources,
            privileges: t.privileges,
            network: t.network,
            image_id: t.imageId,
            ready: t.ready ? 1 : 0,
            created_at: t.createdAt,
            node_id: t.nodeId,
          })
          .execute();
      } catch (err) {
        if (adapter.isUniqueViolation(err)) throw new TemplateExistsError(t.name);
        throw err;
      }
    },
    async setReady(id, ready) {
      await db
        .updateTable("templates")
        .set({ ready: ready ? 1 : 0 })
        .where("id", "=", id)
        .execute();
    },
    async get(orgId, name) {
      const row = await db
        .selectFrom("templates")
        .selectAll()
        .where((eb) => eb.and({ org_id: orgId, name, ready: 1 }))
        .executeTakeFirst();
      return row && fromRow(row);
    },
    async list(orgId) {
      const rows = await db
        .selectFrom("templates")
        .selectAll()
        .where((eb) => eb.and({ org_id: orgId, ready: 1 }))
        .orderBy("name")
        .execute();
      return rows.map(fromRow);
    },
    async all(nodeId) {
      let query = db.selectFrom("templates").selectAll();
      if (nodeId !== undefined) query = query.where(ofNode(nodeId));
      return (await query.orderBy("id").execute()).map(fromRow);
    },
    async delete(id) {
      const r = await db.deleteFrom("templates").where("id", "=", id).executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },
  };
}
