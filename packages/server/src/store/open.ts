import { join } from "node:path";
import type { Store } from "./store.js";

export function isPostgresUrl(url: string | undefined): url is string {
  return !!url && /^postgres(ql)?:\/\//i.test(url);
}

/**
 * PostgreSQL when `databaseUrl` is a postgres:// URL, otherwise SQLite at `<dataDir>/ums.db`;
 * migrated to the latest schema. Each dialect is loaded only when it is used.
 */
export async function openStore(opts: {
  dataDir: string;
  databaseUrl?: string | undefined;
  onIdleError?: (err: Error) => void;
  onFeedError?: (err: unknown, what: string) => void;
}): Promise<Store> {
  const store = isPostgresUrl(opts.databaseUrl)
    ? (await import("./postgres/store.js")).createPostgresStore(opts.databaseUrl, {
        ...(opts.onIdleError && { onIdleError: opts.onIdleError }),
        ...(opts.onFeedError && { onFeedError: opts.onFeedError }),
      })
    : (await import("./sqlite/store.js")).createSqliteStore(join(opts.dataDir, "ums.db"));
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
  return store;
}
