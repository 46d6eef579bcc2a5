import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * The databases every store and API suite runs against (kysely style: one suite, looped over
 * every dialect). PostgreSQL needs UMS_TEST_PG_URL (scripts/test starts a private cluster and sets
 * it); each suite gets a database of its own, dropped afterwards.
 */
export interface TestDialect {
  readonly name: "sqlite" | "postgres";
  /** Undefined when this dialect cannot run here, with the reason in `skip`. */
  readonly skip: string | undefined;
  /** A fresh, empty database: the `databaseUrl` to pass to the server (undefined for SQLite). */
  createDatabase(): Promise<{ databaseUrl: string | undefined; drop(): Promise<void> }>;
}

const pgUrl = process.env.UMS_TEST_PG_URL;

export const testDialects: readonly TestDialect[] = [
  {
    name: "sqlite",
    skip: undefined,
    createDatabase: async () => ({ databaseUrl: undefined, drop: async () => {} }),
  },
  {
    name: "postgres",
    skip: pgUrl ? undefined : "UMS_TEST_PG_URL is not set (scripts/test starts a PostgreSQL cluster and sets it)",
    async createDatabase() {
      if (!pgUrl) throw new Error("UMS_TEST_PG_URL is not set");
      const name = `ums_test_${randomBytes(6).toString("hex")}`;
      const admin = new pg.Client({ connectionString: pgUrl });
      await admin.connect();
      try {
        await admin.query(`create database ${name}`);
      } finally {
        await admin.end();
      }
      const url = new URL(pgUrl);
      url.pathname = `/${name}`;
      return {
        databaseUrl: url.toString(),
        async drop() {
          const c = new pg.Client({ connectionString: pgUrl });
          await c.connect();
          try {
            await c.query(`drop database if exists ${name} with (force)`);
          } finally {
            await c.end();
          }
        },
      };
    },
  },
];
