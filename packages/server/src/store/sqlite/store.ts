import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import type { DialectAdapter } from "../kysely/dialect.js";
import type { Database } from "../kysely/schema.js";
import { createKyselyStore } from "../kysely/store.js";
import type { Store } from "../store.js";

const adapter = Object.freeze<DialectAdapter>({
  name: "sqlite" as const,
  isUniqueViolation: (err: unknown) =>
    typeof err === "object" &&
    err !== null &&
    String((err as { code?: unknown }).code).startsWith("SQLITE_CONSTRAINT_UNIQUE"),
  // Kysely's SQLite driver runs one transaction at a time on its single connection, and SQLite
  // itself allows one writer: creation is already serialised.
  lockOrg: async () => {},
});

/** The embedded default: SQLite in WAL mode at `path`. */
export function createSqliteStore(path: string): Store {
  mkdirSync(dirname(path), { recursive: true });
  const database = new SQLite(path);
  database.pragma("journal_mode = WAL");
  database.pragma("synchronous = NORMAL");
  database.pragma("foreign_keys = ON");
  database.pragma("busy_timeout = 5000");
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  return createKyselyStore(db, adapter);
}
