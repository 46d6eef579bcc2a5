import type { Kysely } from "kysely";
import type { ImageRecord } from "../records.js";
import { ImageExistsError, type ImageStore } from "../store.js";
import type { DialectAdapter } from "./dialect.js";
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
          })
          .execute();
      } catch (err) {
        if (adapter.isUniqueViolation(err)) throw new ImageExistsError(i.name);
        throw err;
      }
    },
    async finish(i) {
      await db
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
    },
    async setReady(id, ready) {
      await db
        .updateTable("images")
        .set({ ready: ready ? 1 : 0 })
        .where("id", "=", id)
        .execute();
    },
    async get(orgId, name) {
      const row = await db
        .selectFrom("images")
        .selectAll()
        .where((eb) => eb.and({ org_id: orgId, name, ready: 1 }))
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
        .where((eb) => eb.and({ org_id: orgId, ready: 1 }))
        .orderBy("name")
        .execute();
      return rows.map(fromRow);
    },
    async all() {
      return (await db.selectFrom("images").selectAll().orderBy("id").execute()).map(fromRow);
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
