import type { Transaction } from "kysely";
import type { Database } from "./schema.js";

/** What differs between databases beyond what Kysely's own dialect hides. */
export interface DialectAdapter {
  readonly name: "sqlite" | "postgres";
  isUniqueViolation(err: unknown): boolean;
  /** Serialises writers of one organization's units for the rest of `trx`. */
  lockOrg(trx: Transaction<Database>, orgId: string): Promise<void>;
}
