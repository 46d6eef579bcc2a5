import type { Kysely } from "kysely";
import type { ConsoleSessionRecord } from "../records.js";
import type { ConsoleSessionStore } from "../store.js";
import { JOINED_ORG_COLUMNS, joinedOrgFromRow, tokenFromRow } from "./rows.js";
import type { ConsoleSessionsTable, Database } from "./schema.js";

function fromRow(r: ConsoleSessionsTable): ConsoleSessionRecord {
  return Object.freeze({
    idHash: r.id_hash,
    orgId: r.org_id,
    tokenId: r.token_id,
    csrf: r.csrf,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  });
}

/** Issue #14: console sessions over Kysely (both dialects). Timestamps are ISO 8601 UTC, so they compare as text. */
export function consoleSessionStore(db: Kysely<Database>): ConsoleSessionStore {
  return {
    async insert(s) {
      // Sessions that can no longer be used: expired, or of a revoked token.
      await db.deleteFrom("console_sessions").where("expires_at", "<=", s.createdAt).execute();
      await db
        .deleteFrom("console_sessions")
        .where("token_id", "in", db.selectFrom("tokens").select("id").where("revoked_at", "is not", null))
        .execute();
      await db
        .insertInto("console_sessions")
        .values({
          id_hash: s.idHash,
          org_id: s.orgId,
          token_id: s.tokenId,
          csrf: s.csrf,
          created_at: s.createdAt,
          expires_at: s.expiresAt,
        })
        .execute();
    },
    async authenticate(idHash, at) {
      const row = await db
        .selectFrom("console_sessions")
        .innerJoin("tokens", "tokens.id", "console_sessions.token_id")
        .innerJoin("orgs", "orgs.id", "tokens.org_id")
        .selectAll("tokens")
        .select([
          "console_sessions.id_hash as s_id_hash",
          "console_sessions.org_id as s_org_id",
          "console_sessions.csrf as s_csrf",
          "console_sessions.created_at as s_created_at",
          "console_sessions.expires_at as s_expires_at",
          ...JOINED_ORG_COLUMNS,
        ])
        .where("console_sessions.id_hash", "=", idHash)
        .where("console_sessions.expires_at", ">", at)
        .where("tokens.revoked_at", "is", null)
        .executeTakeFirst();
      // A session is its token's organization's; a row saying otherwise is refused, never mixed.
      if (!row || row.s_org_id !== row.org_id) return undefined;
      return {
        session: fromRow({
          id_hash: row.s_id_hash,
          org_id: row.s_org_id,
          token_id: row.id,
          csrf: row.s_csrf,
          created_at: row.s_created_at,
          expires_at: row.s_expires_at,
        }),
        token: tokenFromRow(row),
        org: joinedOrgFromRow(row),
      };
    },
    async delete(idHash) {
      const r = await db.deleteFrom("console_sessions").where("id_hash", "=", idHash).executeTakeFirst();
      return Number(r.numDeletedRows) > 0;
    },
  };
}
