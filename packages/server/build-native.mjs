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

/**
 * Compiles `source` (in src/native) with `args` into `out`; undefined, with a warning saying what goes
 * without it, when it cannot be built. Renamed in, never rewritten in place: a running server may be
 * starting the helper or have the addon loaded.
 */
function compile(source, args, out, without) {
  const src = join(here, "src", "native", source);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  try {
    execFileSync(process.env.CC || "cc", [...args, "-Wall", "-Werror", "-o", tmp, src], {
      stdio: ["ignore", "inherit", "inherit"],
    });
  } catch (err) {
    rmSync(tmp, { force: true });
    rmSync(out, { force: true });
    console.warn(`warning: ${src} not built (${err.message}); ${without}`);
    return undefined;
  }
  renameSync(tmp, out);
  return out;
}

export const buildViewHelper = () =>
  compile("view-mount.c", ["-O2"], viewHelperFile, "checkpoint views are bound with mount(8)");

export const fdReadAddon = join(here, "dist", "native", "ums-fd-read.node");
export const btrfsAddon = join(here, "dist", "native", "ums-btrfs.node");

/** A node addon (N-API: any node of this major): with node's headers, shared, and threads. */
const addonArgs = (moduleName) => [
  "-O2",
  "-fPIC",
  "-shared",
  `-I${join(dirname(process.execPath), "..", "include", "node")}`,
  `-DNODE_GYP_MODULE_NAME=${moduleName}`,
  "-pthread",
];

export const buildFdRead = () =>
  compile("fd-read.c", addonArgs("ums_fd_read"), fdReadAddon, "large reads go as bytes through the agent");
export const buildBtrfs = () =>
  compile("btrfs-snapshot.c", addonArgs("ums_btrfs"), btrfsAddon, "snapshots are made with `btrfs subvolume snapshot`");

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildViewHelper();
  buildFdRead();
  buildBtrfs();
}
