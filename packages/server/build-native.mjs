#!/usr/bin/env node
// The server's native helper (run by `npm run build:agent`, with the agent's): dist/native/ums-view
// (src/native/view-mount.c), which binds checkpoints into units' checkpoint views in one process.
// Without a compiler it is not built, and the server makes those binds with mount(8), a few
// process starts per checkpoint (runtime/runc/checkpoint-view.ts).
import { execFileSync } from "node:child_process";
import { mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const viewHelperFile = join(here, "dist", "native", "ums-view");

export function buildViewHelper() {
  const src = join(here, "src", "native", "view-mount.c");
  mkdirSync(dirname(viewHelperFile), { recursive: true });
  const tmp = `${viewHelperFile}.${process.pid}.tmp`;
  try {
    execFileSync(process.env.CC || "cc", ["-O2", "-Wall", "-Werror", "-o", tmp, src], {
      stdio: ["ignore", "inherit", "inherit"],
    });
  } catch (err) {
    rmSync(tmp, { force: true });
    rmSync(viewHelperFile, { force: true });
    console.warn(`warning: ${src} not built (${err.message}); checkpoint views are bound with mount(8)`);
    return undefined;
  }
  // Renamed in, never rewritten in place: a running server may be starting it.
  renameSync(tmp, viewHelperFile);
  return viewHelperFile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildViewHelper();
