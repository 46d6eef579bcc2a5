import { existsSync } from "node:fs";
import { readFile, realpath, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { readNodeId } from "../node/registry/registration.js";
import { run } from "../runtime/exec/host-command.js";
import { readHostNetwork } from "../runtime/network/conflicts.js";
import { removeFirewall } from "../runtime/network/firewall.js";
import { tearDownUnitNetwork } from "../runtime/network/unit-network.js";
import { removeCgroups } from "../runtime/runc/cgroups.js";
import { Runc } from "../runtime/runc/runc.js";
import { deleteSubvolume } from "../runtime/storage/btrfs.js";
import { mountAt, unmountBelow } from "../runtime/storage/mounts.js";
import { closePool, poolPaths } from "../runtime/storage/pool.js";
import { serversOn } from "./running.js";
import { removeService } from "./systemd.js";

export interface UninstallOpts {
  readonly dataDir: string;
  /** A pool given with --pool-dir (not the data dir's own): left mounted; with `purge`, this server's unit disks in it go. */
  readonly poolDir?: string | undefined;
  /** Also delete the data dir (database, keys, the pool file with the units' disks). */
  readonly purge: boolean;
  /** Where `ums install` put the service file; undefined: not looked for. */
  readonly unitDir?: string | undefined;
}

export interface UninstallReport {
  readonly removed: string[];
  readonly left: string[];
}

export class ServerRunningError extends Error {}

/**
 * Issue #20 part 7: removes what `ums serve` of this data dir put on the host: its units'
 * containers (stopped first), network namespaces, veths and checkpoint views, its nft table, the
 * unit subnet's guard route, the forwarding it switched on per uplink, its cgroups, the pool's
 * mount and loop device, the service file. Refuses while a server runs on the data dir.
 */
export async function uninstall(o: UninstallOpts): Promise<UninstallReport> {
  const dataDir = await realpath(o.dataDir).catch(() => resolve(o.dataDir));
  const removed: string[] = [];
  const left: string[] = [];
  const running = await serversOn(dataDir);
  if (running.length > 0) {
    throw new ServerRunningError(
      `ums serve (pid ${running.join(", ")}) runs on ${dataDir}: stop it first (systemctl stop ums, or kill -TERM ${running[0]})`,
    );
  }
  if (o.unitDir) {
    const service = await removeService(o.unitDir);
    if (service?.includes("left as it is")) left.push(service);
    else if (service) removed.push(service);
  }
  const rid = (await readFile(join(dataDir, "runtime-id"), "utf8").catch(() => "")).trim();
  if (!/^[0-9a-f]{4}$/.test(rid)) {
    left.push(existsSync(dataDir) ? `${dataDir}: no server ran on it (no runtime id)` : `${dataDir}: does not exist`);
    return { removed, left };
  }

  // Units: their containers (runc kills what still runs), networks and checkpoint views.
  const runc = new Runc(join(dataDir, "runc"));
  const containers = await runc.list().catch(() => []);
  for (const c of containers) await runc.delete(c.id);
  if (containers.length) removed.push(`${containers.length} unit container(s), stopped and deleted`);
  const { stdout } = await run("ip", ["netns", "list"]);
  let nets = 0;
  for (const line of stdout.split("\n")) {
    const m = new RegExp(`^ums${rid}-(\\d+)`).exec(line);
    if (m) {
      await tearDownUnitNetwork(rid, Number(m[1]));
      nets++;
    }
  }
  if (nets) removed.push(`${nets} unit network namespace(s) and veth pair(s)`);
  const views = await unmountBelow(join(dataDir, "run")).catch(() => 0);
  if (views) removed.push(`${views} checkpoint view mount(s)`);

  // The firewall table, and the subnet's guard route it names.
  const table = (await readHostNetwork()).tables.find((t) => t.rid === rid);
  await removeFirewall(rid);
  if (table) {
    removed.push(`the nft table inet ums_${rid}`);
    const gone = await run("ip", ["route", "del", "unreachable", table.subnet]).then(
      () => true,
      () => false,
    );
    if (gone) removed.push(`the route unreachable ${table.subnet}`);
  }
  // Forwarding ums switched on (uplinks.ts remembers where).
  const uplinksFile = join(dataDir, "uplinks.json");
  const uplinks = JSON.parse(await readFile(uplinksFile, "utf8").catch(() => "[]")) as string[];
  for (const dev of uplinks) {
    const sysctl = `/proc/sys/net/ipv4/conf/${dev}/forwarding`;
    if (/^[\w.-]{1,15}$/.test(dev) && existsSync(sysctl)) {
      await writeFile(sysctl, "0");
      removed.push(`forwarding on ${dev} (switched off again)`);
    }
  }
  await rm(uplinksFile, { force: true });
  await removeCgroups(rid);
  removed.push(`the cgroups ums-${rid}`);

  // The pool: the data dir's own is unmounted and its loop device detached; a given one stays.
  const own = poolPaths(dataDir);
  if (o.poolDir && resolve(o.poolDir) !== own.path) {
    if (o.purge) {
      let disks = 0;
      for (const c of await unitIds(dataDir)) {
        const dir = join(o.poolDir, "units", c);
        if (!existsSync(dir)) continue;
        await deleteUnitDisk(dir);
        disks++;
      }
      if (disks) removed.push(`${disks} unit disk(s) in the pool ${o.poolDir}`);
      let templates = 0;
      for (const id of await templateIds(dataDir)) {
        const dir = join(o.poolDir, "templates", id);
        if (!existsSync(dir)) continue;
        await deleteSubvolume(dir).catch(() => {});
        templates++;
      }
      if (templates) removed.push(`${templates} template(s) in the pool ${o.poolDir}`);
    }
    left.push(
      `the pool ${o.poolDir} (given with --pool-dir), mounted${o.purge ? "" : ", with this server's unit disks"}`,
    );
  } else if (await mountAt(own.path)) {
    await closePool({ dataDir });
    removed.push(`the pool mount ${own.path} and its loop device`);
  }
  if (o.purge) {
    await rm(dataDir, { recursive: true, force: true });
    removed.push(`the data dir ${dataDir}`);
  } else {
    left.push(`the data dir ${dataDir} (database, keys, pool file with the units' disks): remove it with --purge`);
  }
  return { removed, left };
}

/**
 * The ids of this node's units in this data dir's database (for their disks in a shared pool): not
 * those of other nodes sharing the database (issue #15).
 */
async function unitIds(dataDir: string): Promise<string[]> {
  const { openStore } = await import("../store/open.js");
  try {
    const store = await openStore({ dataDir, databaseUrl: process.env.UMS_DATABASE_URL || undefined });
    try {
      return (await store.units.withStatus(["cold", "warm", "running"], await readNodeId(dataDir))).map((u) => u.id);
    } finally {
      await store.close();
    }
  } catch {
    return [];
  }
}

/** The ids of this node's templates (issue #18: subvolumes `templates/<id>` in the pool). */
async function templateIds(dataDir: string): Promise<string[]> {
  const { openStore } = await import("../store/open.js");
  try {
    const store = await openStore({ dataDir, databaseUrl: process.env.UMS_DATABASE_URL || undefined });
    try {
      return (await store.templates.all(await readNodeId(dataDir))).map((t) => t.id);
    } finally {
      await store.close();
    }
  } catch {
    return [];
  }
}

async function deleteUnitDisk(dir: string): Promise<void> {
  const cps = join(dir, "checkpoints");
  const { readdir } = await import("node:fs/promises");
  for (const cp of await readdir(cps).catch(() => [] as string[])) await deleteSubvolume(join(cps, cp)).catch(() => {});
  await deleteSubvolume(join(dir, "rootfs")).catch(() => {});
  await rm(dir, { recursive: true, force: true });
}
