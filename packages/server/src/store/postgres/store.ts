import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import type { DialectAdapter } from "../kysely/dialect.js";
import type { Database } from "../kysely/schema.js";
import { createKyselyStore } from "../kysely/store.js";
import type { Store } from "../store.js";
import { PostgresEventFeed } from "./event-feed.js";

const adapter = Object.freeze<DialectAdapter>({
  name: "postgres" as const,
  // 23505 = unique_violation (PostgreSQL docs, Appendix A).
  isUniqueViolation: (err: unknown) =>
    typeof err === "object" && err !== null && (err as { code?: unknown }).code === "23505",
  // Row lock on the organization: concurrent creates of one org's units queue here, so the
  // count-then-insert of the unit limit cannot race (READ COMMITTED would let it).
  lockOrg: async (trx, orgId) => {
    await sql`select id from orgs where id = ${orgId} for update`.execute(trx);
  },
});

/** PostgreSQL, selected by a `postgres://` (or `postgresql://`) URL. */
export function createPostgresStore(
  url: string,
  opts: {
    maxConnections?: number;
    onIdleError?: (err: Error) => void;
    /** The event feed's trouble (issue #15), said as `what` happened. */
    onFeedError?: (err: unknown, what: string) => void;
  } = {},
): Store {
  const pool = new pg.Pool({ connectionString: url, max: opts.maxConnections ?? 10 });
  // An idle pooled connection that dies (server restart, pg_terminate_backend) is dropped from the
  // pool and replaced on the next query; without a listener the pool's 'error' event would throw.
  pool.on("error", (err) => opts.onIdleError?.(err));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  // The feed reads an event that did not fit its notice through the store's own event reader.
  let events: Store["events"] | undefined;
  const feed = new PostgresEventFeed(url, { get: (id) => (events as Store["events"]).get(id) }, (err, what) =>
    opts.onFeedError?.(err, what),
  );
  const store = createKyselyStore(db, adapter, feed);
  events = store.events;
  return store;
}
