import { createRequire } from "node:module";
import type * as NodePty from "node-pty";

// node-pty is a native addon, so it is not bundled: the host bind-mounts its package at
// <agent dir>/node_modules/node-pty (read-only), and it is resolved from this file's own directory
// (docs/ARCHITECTURE.md section 1: "PTY: node-pty inside the agent"). UMS_AGENT_NODE_PTY may name another location.
// It is loaded on the first TTY session only, so pipe sessions work even where it is missing.

let cached: typeof NodePty | null = null;

export function loadNodePty(): typeof NodePty {
  if (cached) return cached;
  const localRequire = createRequire(import.meta.url);
  cached = localRequire(process.env.UMS_AGENT_NODE_PTY || "node-pty") as typeof NodePty;
  return cached;
}
