import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { readNodeId } from "../node/registry/registration.js";
import { run } from "../runtime/exec/host-command.js";
import { testImage } from "../runtime/image/test-image.js";
import { removeFirewall } from "../runtime/network/firewall.js";
import { tearDownUnitNetwork } from "../runtime/network/unit-network.js";
import { removeCgroups } from "../runtime/runc/cgroups.js";
import { Runc } from "../runtime/runc/runc.js";
import { deleteSubvolume } from "../runtime/storage/btrfs.js";
import { unmountBelow } from "../runtime/storage/mounts.js";
import { TEST_NETWORK_ENV, testSubnet } from "./runtime.js";

/**
 * For tests that run `ums serve` as a child process on the shared test pool: the environment that
 * points it there, and the cleanup of what it leaves on the host once it has stopped.
 */
export async function testServeEnv(subnetIndex: number): Promise<Record<string, string>> {
  const image = await testImage();
  return {
    UMS_POOL_DIR: image.pool.path,
    UMS_IMAGE_VARIANT: "test",
    UMS_UNIT_SUBNET: testSubnet(subnetIndex),
    ...TEST_NETWORK_ENV,
    // Test servers run side by side: each gateway on a free port.
    UMS_GATEWAY_PORT: "0",
  };
}

/** Removes a stopped server's firewall table and cgroups (units keep theirs until deleted). */
export async function removeServerHostResources(dataDir: string): Promise<void> {
  const rid = (await readFile(join(dataDir, "runtime-id"), "utf8").catch(() => "")).trim();
  if (!rid) return;
  await removeFirewall(rid);
  await removeCgroups(rid);
}

/** Deletes the disk of a unit that was never booted (or whose container is gone). */
export async function deleteUnitDisk(unitId: string): Promise<void> {
  const image = await testImage();
  const dir = join(image.pool.path, "units", unitId);
  const checkpoints = await readdir(join(dir, "checkpoints")).catch(() => [] as string[]);
  for (const cp of checkpoints) await deleteSubvolume(join(dir, "checkpoints", cp)).catch(() => {});
  await deleteSubvolume(join(dir, "rootfs")).catch(() => {});
  await rm(dir, { recursive: true, force: true });
}

/**
 * Everything a stopped `ums serve` (run by a test on the shared pool) left on the host: its units'
 * containers, networks and disks, its firewall table and cgroups. The data dir itself stays.
 */
export async function cleanupStoppedServer(dataDir: string, databaseUrl?: string): Promise<void> {
  const { openStore } = await import("../store/open.js");
  let ids: string[] = [];
  let templates: string[] = [];
  let images: string[] = [];
  try {
    const store = await openStore({ dataDir, databaseUrl });
    try {
      // Its node's units, templates and images (issue #15): not those of others sharing the database.
      const nodeId = await readNodeId(dataDir).catch(() => undefined);
      ids = (await store.units.withStatus(["cold", "warm", "running"], nodeId)).map((u) => u.id);
      templates = (await store.templates.all(nodeId)).map((t) => t.id);
      images = (await store.images.all(nodeId)).map((i) => i.id);
      // Its node's row: a database that outlives the run (a bench's) can serve the next one.
      const node = nodeId ? await store.nodes.get(nodeId) : undefined;
      if (node) await store.nodes.remove(node.name, { forgetUnits: true });
    } finally {
      await store.close();
    }
  } catch {}
  const runc = new Runc(join(dataDir, "runc"));
  for (const id of ids) await runc.delete(id);
  // The units' checkpoint views (binds in their run dirs) go before their disks.
  await unmountBelow(join(dataDir, "run")).catch(() => {});
  for (const id of ids) await deleteUnitDisk(id);
  // Its templates (issue #18): read-only subvolumes of their own in the pool.
  const image = await testImage();
  for (const id of templates) await deleteSubvolume(join(image.pool.path, "templates", id)).catch(() => {});
  // Its organizations' images (issue #18): imported or built, with an import's upload and work dir.
  for (const id of images) {
    const dir = join(image.pool.path, "imported");
    await deleteSubvolume(join(dir, id)).catch(() => {});
    await rm(join(dir, `.${id}.tar`), { force: true });
    await rm(join(dir, `.${id}.work`), { recursive: true, force: true });
  }
  const rid = (await readFile(join(dataDir, "runtime-id"), "utf8").catch(() => "")).trim();
  if (rid) {
    const { stdout } = await run("ip", ["netns", "list"]);
    for (const line of stdout.split("\n")) {
      const m = new RegExp(`^ums${rid}-(\\d+)`).exec(line);
      if (m) await tearDownUnitNetwork(rid, Number(m[1]));
    }
  }
  await removeServerHostResources(dataDir);
}
