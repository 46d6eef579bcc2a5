#!/usr/bin/env node
// The server's native helper (run by `npm run build:agent`, with the agent's): dist/native/ums-view
// (src/native/view-mount.c), which binds checkpoints into units' checkpoint views in one process.
// Without a compiler it is not built, and the server makes those binds with mount(8), a few
// process starts per checkpoint (runtime/runc/checkpoint-view.ts). And dist/native/ums-fd-read.node
// (src/native/fd-read.c), the addon that sends a large read's file to its client with sendfile(2)
// (agent/fd-read.ts); without it such reads go as bytes through the agent. And dist/native/ums-btrfs.node
// (src/native/btrfs-snapshot.c): snapshots made with their ioctl in the server (runtime/storage/btrfs.ts);
// without it, with `btrfs subvolume snapshot`.
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
export const btrfsAddon = join(here, "dist", "native", "ums-btrfs.node");

/** A node addon (N-API: any node of this major) from `source` into `out`; undefined when it cannot be built. */
function buildAddon(source, out, moduleName, without) {
  const src = join(here, "src", "native", source);
  const headers = join(dirname(process.execPath), "..", "include", "node");
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const args = ["-O2", "-fPIC", "-shared", `-I${headers}`, `-DNODE_GYP_MODULE_NAME=${moduleName}`, "-Wall", "-Werror"];
  try {
    execFileSync(process.env.CC || "cc", [...args, "-o", tmp, src, "-lpthread"], {
      stdio: ["ignore", "inherit", "inherit"],
    });
  } catch (err) {
    rmSync(tmp, { force: true });
    rmSync(out, { force: true });
    console.warn(`warning: ${src} not built (${err.message}); ${without}`);
    return undefined;
  }
  // Renamed in, never rewritten in place: a running server has it loaded.
  renameSync(tmp, out);
  return out;
}

export const buildFdRead = () =>
  buildAddon("fd-read.c", fdReadAddon, "ums_fd_read", "large reads go as bytes through the agent");
export const buildBtrfs = () =>
  buildAddon("btrfs-snapshot.c", btrfsAddon, "ums_btrfs", "snapshots are made with `btrfs subvolume snapshot`");

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildViewHelper();
  buildFdRead();
  buildBtrfs();
}
