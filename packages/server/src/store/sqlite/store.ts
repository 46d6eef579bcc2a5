import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import { createPrivateFile, restrictFile } from "../../data-dir.js";
import type { DialectAdapter } from "../kysely/dialect.js";
import { type DirectReader, registerDirectReader } from "../kysely/prepared.js";
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

/**
 * better-sqlite3 compiles a statement on every `prepare()`, and Kysely prepares every query it runs:
 * on the hot paths (a bearer token and a unit looked up per request) compiling cost more than running.
 * Statements are kept by SQL text (bounded: queries are built from a fixed set of shapes); SQLite
 * recompiles a kept statement by itself after a schema change. One still being iterated is busy and
 * is not handed out twice.
 */
export function cacheStatements(database: SQLite.Database, max = 500): void {
  const cache = new Map<string, SQLite.Statement>();
  const prepare = database.prepare.bind(database);
  database.prepare = ((sql: string) => {
    const kept = cache.get(sql);
    if (kept && !kept.busy) return kept;
    const stmt = prepare(sql);
    if (!kept) {
      if (cache.size >= max) cache.delete(cache.keys().next().value as string);
      cache.set(sql, stmt);
    }
    return stmt;
  }) as typeof database.prepare;
}

/**
 * `prepared` reads (store/kysely/prepared.ts) run at once on the one connection when no
 * transaction is open on it: then nothing can interleave with a synchronous read. While one is
 * open (a Kysely transaction awaiting between its statements), they wait for Kysely's turn as every
 * other query does, and never see the transaction's uncommitted rows.
 */
export function sqliteDirectReader(database: SQLite.Database): DirectReader {
  return (sql, values) => {
    if (database.inTransaction) return undefined;
    const stmt = database.prepare(sql);
    return stmt.reader ? (stmt.all(values as unknown[]) as unknown[]) : undefined;
  };
}

/** The embedded default: SQLite in WAL mode at `path`. */
export function createSqliteStore(path: string): Store {
  mkdirSync(dirname(path), { recursive: true });
  // Root's alone, and so are its -wal and -shm: SQLite creates those with the database's mode
  // (issue #19 finding 10); loose ones of an older version are corrected.
  createPrivateFile(path);
  for (const f of [`${path}-wal`, `${path}-shm`]) restrictFile(f);
  const database = new SQLite(path);
  database.pragma("journal_mode = WAL");
  database.pragma("synchronous = NORMAL");
  database.pragma("foreign_keys = ON");
  database.pragma("busy_timeout = 5000");
  cacheStatements(database);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  registerDirectReader(db, sqliteDirectReader(database));
  return createKyselyStore(db, adapter);
}
