import type { Kysely } from "kysely";
import type { ImageRecord } from "../records.js";
import { ImageExistsError, type ImageStore } from "../store.js";
import type { DialectAdapter } from "./dialect.js";
import { ofNode } from "./rows.js";
import type { Database, ImagesTable } from "./schema.js";

function fromRow(r: ImagesTable): ImageRecord {
  return Object.freeze({
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    source: r.source,
    environmentVersion: r.environment_version,
    config: r.config,
    bytes: Number(r.bytes),
    ready: Number(r.ready) === 1,
    createdAt: r.created_at,
    supersededAt: r.superseded_at ?? null,
    nodeId: r.node_id ?? null,
  });
}

/** Issue #18: organization images. */
export function imageStore(db: Kysely<Database>, adapter: DialectAdapter): ImageStore {
  return {
    async insert(i) {
      try {
        await db
          .insertInto("images")
          .values({
            id: i.id,
            org_id: i.orgId,
            name: i.name,
            source: i.source,
            environment_version: i.environmentVersion,
            config: i.config,
            bytes: i.bytes,
            ready: i.ready ? 1 : 0,
            created_at: i.createdAt,
            superseded_at: null,
            node_id: i.nodeId,
          })
          .execute();
      } catch (err) {
        if (adapter.isUniqueViolation(err)) throw new ImageExistsError(i.name);
        throw err;
      }
    },
    async finish(i) {
      // One transaction: the name's build until now is superseded as this one is shown.
      return db.transaction().execute(async (trx) => {
        const now = new Date().toISOString();
        const older = await trx
          .updateTable("images")
          .set({ superseded_at: now })
          .where((eb) =>
            eb.and([
              eb("org_id", "=", i.orgId),
              eb("name", "=", i.name),
              eb("ready", "=", 1),
              eb("superseded_at", "is", null),
              eb("id", "!=", i.id),
            ]),
          )
          .returning("id")
          .execute();
        await trx
          .updateTable("images")
          .set({
            source: i.source,
            environment_version: i.environmentVersion,
            config: i.config,
            bytes: i.bytes,
            ready: 1,
          })
          .where("id", "=", i.id)
          .execute();
        return older.map((r) => r.id);
      });
    },
    async hide(id) {
      // Not ready, and out of the name's current build: a draft of the name may be under way.
      await db
        .updateTable("images")
        .set((eb) => ({ ready: 0, superseded_at: eb.fn.coalesce("superseded_at", eb.val(new Date().toISOString())) }))
        .where("id", "=", id)
        .execute();
    },
    async get(orgId, name) {
      const row = await db
        .selectFrom("images")
        .selectAll()
        .where((eb) =>
          eb.and([
            eb("org_id", "=", orgId),
            eb("name", "=", name),
            eb("ready", "=", 1),
            eb("superseded_at", "is", null),
          ]),
        )
        .executeTakeFirst();
      return row && fromRow(row);
    },
    async getById(id) {
      const row = await db.selectFrom("images").selectAll().where("id", "=", id).executeTakeFirst();
      return row && fromRow(row);
    },
    async list(orgId) {
      const rows = await db
        .selectFrom("images")
        .selectAll()
        .where((eb) => eb.and([eb("org_id", "=", orgId), eb("ready", "=", 1), eb("superseded_at", "is", null)]))
        .orderBy("name")
        .execute();
      return rows.map(fromRow);
    },
    async superseded(nodeId) {
      let query = db
        .selectFrom("images")
        .selectAll()
        .where((eb) => eb.and([eb("ready", "=", 1), eb("superseded_at", "is not", null)]));
      if (nodeId !== undefined) query = query.where(ofNode(nodeId));
      return (await query.orderBy("id").execute()).map(fromRow);
    },
    async all(nodeId) {
      let query = db.selectFrom("images").selectAll();
      if (nodeId !== undefined) query = query.where(ofNode(nodeId));
      return (await query.orderBy("id").execute()).map(fromRow);
    },
    async usedBy(id) {
      const count = async (table: "units" | "templates") =>
        Number(
          (
            await db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll<number | string>().as("n"))
              .where("image_id", "=", id)
              .executeTakeFirstOrThrow()
          ).n,
        );
      return (await count("units")) + (await count("templates"));
    },
    async delete(id) {
      const r = await db.deleteFrom("images").where("id", "=", id).executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },
  };
}
