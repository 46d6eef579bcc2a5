/** The store entry point for tools that need the database but not the HTTP server (the CLI). */
export { isPostgresUrl, openStore } from "./open.js";
export type { OrgLimits, OrgRecord, TokenRecord, TokenRole, UnitRecord } from "./records.js";
export type { Store } from "./store.js";
