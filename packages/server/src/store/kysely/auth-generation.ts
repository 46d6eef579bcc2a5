import { type Kysely, sql, type Transaction } from "kysely";
import type { EventFeed } from "../store.js";
import type { DialectAdapter } from "./dialect.js";
import { prepared } from "./prepared.js";
import type { Database } from "./schema.js";

/** PostgreSQL: the channel a token revoke or an organization's change is announced on. */
export const AUTH_CHANNEL = "ums_auth";

/**
 * Issue #16 part 2: what tells a kept token lookup from a stale one. A counter in the database
 * moves in the same transaction as every token revoke and every change of an organization's row
 * (not its unit count); a lookup is kept with the generation read before it, and used only while
 * the generation is the same. No change can slip between the two reads: a change committed before
 * the lookup is in the lookup, one committed after it moves the generation.
 *
 * - SQLite: the counter is read per request (a statement on the one connection, microseconds), so a
 *   revoke by any process (the CLI's `ums token revoke` included) holds from the next request on.
 * - PostgreSQL: reading it would cost the round trip the cache saves. The event feed's connection
 *   LISTENs to the change's notice instead (`EventFeed.authGeneration`); the process that made the
 *   change moves its own generation at once, other processes when the notice arrives (it is sent at
 *   commit: milliseconds). While the feed does not listen, nothing is kept.
 */
export interface AuthGeneration {
  current(): Promise<string | undefined>;
  /**
   * Runs `change` in a transaction; when it says it changed something (true), the counter moves in
   * that transaction, and this process's generation once it committed. Returns what `change` said.
   */
  change(change: (trx: Transaction<Database>) => Promise<boolean>): Promise<boolean>;
}

export function authGeneration(db: Kysely<Database>, adapter: DialectAdapter, feed?: EventFeed): AuthGeneration {
  const read = prepared(db, 0, () => db.selectFrom("auth_generation").select("gen").where("id", "=", 1));
  const postgres = adapter.name === "postgres";
  return {
    async current() {
      if (postgres) return feed?.authGeneration();
      const [row] = await read();
      return row && String(row.gen);
    },
    async change(change) {
      const made = await db.transaction().execute(async (trx) => {
        if (!(await change(trx))) return false;
        await trx
          .updateTable("auth_generation")
          .set((eb) => ({ gen: eb("gen", "+", 1) }))
          .where("id", "=", 1)
          .execute();
        if (postgres) await sql`select pg_notify(${AUTH_CHANNEL}, '')`.execute(trx);
        return true;
      });
      if (made) feed?.authChanged();
      return made;
    },
  };
}
