/**
 * The host runtime's building blocks that tools outside the server (the CLI) use without loading the
 * HTTP server or the database drivers: the btrfs pool and the base image.
 */
export * from "./image/index.js";
export * from "./storage/index.js";
