export * from "./checkpoints.js";
export * from "./duration.js";
export * from "./errors.js";
export * from "./names.js";
export * from "./organization.js";
export * from "./policies.js";
export * from "./units.js";
export * from "./versions.js";
