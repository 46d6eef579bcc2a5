import { join } from "node:path";
import { createPostgresStore } from "./postgres/store.js";
import { createSqliteStore } from "./sqlite/store.js";
import type { Store } from "./store.js";

export function isPostgresUrl(url: string | undefined): url is string {
  return !!url && /^postgres(ql)?:\/\//i.test(url);
}

/** PostgreSQL when `databaseUrl` is a postgres:// URL, otherwise SQLite at `<dataDir>/ums.db`. */
export async function openStore(opts: { dataDir: string; databaseUrl?: string | undefined }): Promise<Store> {
  const store = isPostgresUrl(opts.databaseUrl)
    ? createPostgresStore(opts.databaseUrl)
    : createSqliteStore(join(opts.dataDir, "ums.db"));
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
  return store;
}
