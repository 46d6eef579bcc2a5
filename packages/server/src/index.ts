export { generateToken, hashToken, mintToken, newTokenId } from "./auth/tokens.js";
export { ConfigError, type ConfigInput, resolveConfig, type ServerConfig } from "./config.js";
export { type FaultKind, faultCounts, installLastResort } from "./faults.js";
export { createLogger } from "./log.js";
export { type RunningServer, startServer } from "./start.js";
export { isPostgresUrl, openStore } from "./store/open.js";
export type { OrgRecord, TokenRecord, TokenRole, UnitRecord } from "./store/records.js";
export type { Store } from "./store/store.js";
export type { LimitKind, OnLimitReached, UsageSampler } from "./usage/sampler.js";
