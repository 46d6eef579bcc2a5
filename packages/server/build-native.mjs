#!/usr/bin/env node
// The server's native helper (run by `npm run build:agent`, with the agent's): dist/native/ums-view
// (src/native/view-mount.c), which binds checkpoints into units' checkpoint views in one process.
// Without a compiler it is not built, and the server makes those binds with mount(8), a few
// process starts per checkpoint (runtime/runc/checkpoint-view.ts). And dist/native/ums-fd-read.node
// (src/native/fd-read.c), the addon that sends a large read's file to its client with sendfile(2)
// (agent/fd-read.ts); without it such reads go as bytes through the agent.
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

export const fdReadAddon = join(here, "dist", "native", "ums-fd-read.node");

export function buildFdRead() {
  const src = join(here, "src", "native", "fd-read.c");
  const headers = join(dirname(process.execPath), "..", "include", "node");
  mkdirSync(dirname(fdReadAddon), { recursive: true });
  const tmp = `${fdReadAddon}.${process.pid}.tmp`;
  const args = ["-O2", "-fPIC", "-shared", `-I${headers}`, "-DNODE_GYP_MODULE_NAME=ums_fd_read", "-Wall", "-Werror"];
  try {
    execFileSync(process.env.CC || "cc", [...args, "-o", tmp, src, "-lpthread"], {
      stdio: ["ignore", "inherit", "inherit"],
    });
  } catch (err) {
    rmSync(tmp, { force: true });
    rmSync(fdReadAddon, { force: true });
    console.warn(`warning: ${src} not built (${err.message}); large reads go as bytes through the agent`);
    return undefined;
  }
  renameSync(tmp, fdReadAddon);
  return fdReadAddon;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildViewHelper();
  buildFdRead();
}
