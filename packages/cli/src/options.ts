import { resolveConfig } from "@ums/server/config";
import { openStore, type Store } from "@ums/server/store";
import { type Command, Option } from "commander";
import { UsageError } from "./errors.js";

/** `--data-dir`, shared by every command that opens the store. */
export function withDataDir(cmd: Command): Command {
  return cmd.addOption(new Option("--data-dir <dir>", "data directory (env UMS_DATA_DIR, default ./data)"));
}

/** The store the server uses: PostgreSQL when UMS_DATABASE_URL is a postgres:// URL, else SQLite in the data dir. */
export async function storeFor(opts: { dataDir?: string }): Promise<Store> {
  const config = resolveConfig({ dataDir: opts.dataDir });
  return openStore(config);
}

export async function withStore<T>(opts: { dataDir?: string }, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await storeFor(opts);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

export function nonNegativeInt(flag: string) {
  return (value: string): number => {
    if (!/^\d{1,9}$/.test(value)) throw new UsageError(`${flag} must be a whole number >= 0, got '${value}'`);
    return Number(value);
  };
}
