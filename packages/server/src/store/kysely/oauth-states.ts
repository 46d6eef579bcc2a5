import type { Kysely } from "kysely";
import type { OAuthStateRecord } from "../records.js";
import type { OAuthStateStore } from "../store.js";
import { first } from "./rows.js";
import type { Database, OAuthStatesTable } from "./schema.js";

function fromRow(r: OAuthStatesTable): OAuthStateRecord {
  return Object.freeze({
    stateHash: r.state_hash,
    orgId: r.org_id,
    provider: r.provider,
    redirectUri: r.redirect_uri,
    scopes: r.scopes,
    connectorId: r.connector_id,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    usedAt: r.used_at,
    sessionHash: r.session_hash ?? null,
  });
}

/** Spec 4.8 pending authorizations over Kysely (both dialects). Timestamps are ISO 8601 UTC, so they compare as text. */
export function oauthStateStore(db: Kysely<Database>): OAuthStateStore {
  return {
    async insert(s) {
      await db.deleteFrom("oauth_states").where("expires_at", "<=", s.createdAt).execute();
      const r = await db
        .insertInto("oauth_states")
        .values({
          state_hash: s.stateHash,
          org_id: s.orgId,
          provider: s.provider,
          redirect_uri: s.redirectUri,
          scopes: s.scopes,
          connector_id: s.connectorId,
          created_at: s.createdAt,
          expires_at: s.expiresAt,
          used_at: s.usedAt,
          session_hash: s.sessionHash ?? null,
        })
        .onConflict((oc) => oc.column("state_hash").doNothing())
        .executeTakeFirst();
      return Number(r.numInsertedOrUpdatedRows ?? 0) > 0;
    },
    async get(stateHash) {
      return first(db.selectFrom("oauth_states").selectAll().where("state_hash", "=", stateHash), fromRow);
    },
    async use(stateHash, at) {
      const r = await db
        .updateTable("oauth_states")
        .set({ used_at: at })
        .where("state_hash", "=", stateHash)
        .where("used_at", "is", null)
        .where("expires_at", ">", at)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) > 0;
    },
  };
}
