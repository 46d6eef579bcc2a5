import type { Kysely } from "kysely";
import type { ConnectorPatch, ConnectorRecord } from "../records.js";
import type { ConnectorStore } from "../store.js";
import { first, patchColumns } from "./rows.js";
import type { ConnectorsTable, Database } from "./schema.js";

function fromRow(r: ConnectorsTable): ConnectorRecord {
  return Object.freeze({
    id: r.id,
    orgId: r.org_id,
    provider: r.provider,
    connectionType: r.connection_type as ConnectorRecord["connectionType"],
    providerAccountId: r.provider_account_id,
    providerAccountName: r.provider_account_name,
    accessPolicy: r.access_policy,
    scopes: r.scopes,
    providerInfo: r.provider_info,
    tokenExpiresAt: r.token_expires_at,
    userId: r.user_id,
    secret: r.secret,
    keyVersion: Number(r.key_version),
    insertedAt: r.inserted_at,
    updatedAt: r.updated_at,
  });
}

/** Where each field of a connector patch is stored. */
const CONNECTOR_PATCH_COLUMNS = {
  accessPolicy: "access_policy",
  scopes: "scopes",
  tokenExpiresAt: "token_expires_at",
  secret: "secret",
  keyVersion: "key_version",
  updatedAt: "updated_at",
} as const satisfies { readonly [K in keyof ConnectorPatch]-?: keyof ConnectorsTable };

/** Spec 2.11 connectors over Kysely (both dialects). */
export function connectorStore(db: Kysely<Database>): ConnectorStore {
  const get = async (orgId: string, id: string) => {
    return first(
      db
        .selectFrom("connectors")
        .selectAll()
        .where((eb) => eb.and({ org_id: orgId, id })),
      fromRow,
    );
  };
  return {
    async insert(c) {
      await db
        .insertInto("connectors")
        .values({
          id: c.id,
          org_id: c.orgId,
          provider: c.provider,
          connection_type: c.connectionType,
          provider_account_id: c.providerAccountId,
          provider_account_name: c.providerAccountName,
          access_policy: c.accessPolicy,
          scopes: c.scopes,
          provider_info: c.providerInfo,
          token_expires_at: c.tokenExpiresAt,
          user_id: c.userId,
          secret: c.secret,
          key_version: c.keyVersion,
          inserted_at: c.insertedAt,
          updated_at: c.updatedAt,
        })
        .execute();
    },
    async list(orgId, provider) {
      let q = db.selectFrom("connectors").selectAll().where("org_id", "=", orgId);
      if (provider) q = q.where("provider", "=", provider);
      return (await q.orderBy("inserted_at").orderBy("id").execute()).map(fromRow);
    },
    get,
    async getById(id) {
      return first(db.selectFrom("connectors").selectAll().where("id", "=", id), fromRow);
    },
    async update(orgId, id, p) {
      const set = patchColumns(p, CONNECTOR_PATCH_COLUMNS) as Partial<ConnectorsTable>;
      if (Object.keys(set).length > 0) {
        await db.updateTable("connectors").set(set).where("org_id", "=", orgId).where("id", "=", id).execute();
      }
      return get(orgId, id);
    },
    async delete(orgId, id) {
      const r = await db.deleteFrom("connectors").where("org_id", "=", orgId).where("id", "=", id).executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },
    async sealedUnder(notVersion, limit) {
      const rows = await db
        .selectFrom("connectors")
        .selectAll()
        .where("key_version", "!=", notVersion)
        .orderBy("id")
        .limit(limit)
        .execute();
      return rows.map(fromRow);
    },
    async reseal(id, from, to, keyVersion) {
      const r = await db
        .updateTable("connectors")
        .set({ secret: to, key_version: keyVersion })
        .where((eb) => eb.and({ id, secret: from }))
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
  };
}
