// Issue #15: before two nodes share a database, each works on its own units, templates and images
// only (docs/SCALE-OUT.md). A node's start (re-adoption, the sweeps) against a real store (every
// dialect) and a runtime that records what the node asked of the host.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import type { RuntimeState, UnitRuntime } from "../runtime/runtime.js";
import { openStore } from "../store/open.js";
import type { ImageRecord, OrgRecord, TemplateRecord, UnitRecord, UnitStatus } from "../store/records.js";
import type { Store } from "../store/store.js";
import { testDialects } from "../testing/dialects.js";
import { Lifecycle } from "./lifecycle.js";

const MINE = "node-11111111-1111-1111-1111-111111111111";
const OTHER = "node-22222222-2222-2222-2222-222222222222";

/** The host as the node sees it: what runs, what a crash left; every call it gets is recorded. */
function fakeRuntime(host: { running: Map<string, RuntimeState>; deleting: string[]; disks: string[] }) {
  const calls: string[] = [];
  const known = new Map<string, ReadonlySet<string> | undefined>();
  const runtime = {
    deleting: async () => host.deleting,
    running: async () => new Map(host.running),
    recover: async (wanted: (unitId: string) => Promise<ReadonlySet<string> | undefined>) => {
      for (const id of host.disks) known.set(id, await wanted(id));
      return [];
    },
    destroy: async (id: string) => void calls.push(`destroy ${id}`),
    forget: async (id: string) => void calls.push(`forget ${id}`),
    stop: async (id: string) => void calls.push(`stop ${id}`),
    deleteTemplate: async (id: string) => void calls.push(`deleteTemplate ${id}`),
    deleteImage: async (id: string) => void calls.push(`deleteImage ${id}`),
    publishTemplate: async (unitId: string, cpId: string, id: string) =>
      void calls.push(`publishTemplate ${unitId} ${cpId}`, `made ${id}`),
    draftRecipeImage: async () => void calls.push("draftRecipeImage"),
    sealRecipeImage: async () => ({ config: { env: [] }, bytes: 1 }),
    close: async () => {},
  };
  return { runtime: runtime as unknown as UnitRuntime, calls, known };
}

for (const dialect of testDialects) {
  describe(`a node works on its own units, templates and images (issue #15, ${dialect.name})`, {
    skip: dialect.skip,
  }, () => {
    let store: Store;
    let dir: string;
    let drop: () => Promise<void>;
    let org: OrgRecord;
    before(async () => {
      dir = await mkdtemp(join(tmpdir(), "ums-readopt-nodes-"));
      const db = await dialect.createDatabase();
      drop = db.drop;
      store = await openStore({ dataDir: dir, databaseUrl: db.databaseUrl });
      org = await store.orgs.ensure("nodes", { maxUnits: 50, runningLimit: 10, warmLimit: 10 });
    });
    after(async () => {
      await store?.close();
      await drop?.();
      await rm(dir, { recursive: true, force: true });
    });

    const unit = (name: string, nodeId: string | null, status: UnitStatus) =>
      store.units.create(
        {
          id: `unit-${name}`,
          orgId: org.id,
          name,
          urlLabel: `${name}-x`,
          status,
          urlAuth: "unit",
          privateAccess: null,
          labels: [],
          version: null,
          environmentVersion: null,
          createdAt: new Date().toISOString(),
          nodeId,
        },
        50,
      );
    const template = (id: string, nodeId: string | null): TemplateRecord => ({
      id,
      orgId: org.id,
      name: id,
      description: "",
      sourceUnit: "src",
      sourceCheckpoint: "v0",
      environmentVersion: null,
      imageId: null,
      resources: "{}",
      privileges: "{}",
      network: '{"rules":[]}',
      ready: false,
      createdAt: new Date().toISOString(),
      nodeId,
    });
    const image = (id: string, name: string, nodeId: string | null): ImageRecord => ({
      id,
      orgId: org.id,
      name,
      source: "x",
      environmentVersion: `${name}@${id}`,
      config: "{}",
      bytes: 1,
      ready: false,
      createdAt: new Date().toISOString(),
      supersededAt: null,
      nodeId,
    });
    const statusOf = async (name: string) => (await store.units.get(org.id, name))?.status;
    const lifecycle = (runtime: UnitRuntime, nodeId: string | undefined) =>
      new Lifecycle(
        store,
        runtime,
        { idleWarmMs: 3_600_000, idleColdMs: 3_600_000, sweepMs: 3_600_000, busyCpu: 1, ...(nodeId && { nodeId }) },
        pino({ level: "silent" }),
        async () => {
          throw new Error("no boot in this test");
        },
      );

    it("at start, leaves another node's records as they are and re-adopts, stops and sweeps only its own", async () => {
      // Recorded as running or warm, nothing of them runs on this host now.
      await unit("mine-gone", MINE, "running");
      await unit("theirs-running", OTHER, "running");
      await unit("theirs-warm", OTHER, "warm");
      await unit("unplaced", null, "warm");
      // Running here: one of this node's, and one whose unit names the other node.
      await unit("mine-live", MINE, "cold");
      await unit("theirs-live", OTHER, "warm");
      // Deletes a crash cut (their tombstones are this host's).
      await unit("mine-deleting", MINE, "cold");
      await unit("theirs-deleting", OTHER, "cold");
      // Half-made (not ready) templates and images: this node's crashed, the other's are under way.
      await store.templates.insert(template("tpl-mine", MINE));
      await store.templates.insert(template("tpl-theirs", OTHER));
      await store.images.insert(image("img-mine", "mine", MINE));
      await store.images.insert(image("img-theirs", "theirs", OTHER));
      // Superseded builds no unit uses: the node removes its own; the other's files are on that host.
      for (const [id, nodeId] of [
        ["img-old-mine", MINE],
        ["img-old-theirs", OTHER],
      ] as const) {
        await store.images.insert(image(id, id, nodeId));
        await store.images.finish({ ...image(id, id, nodeId), ready: true });
        await store.images.insert(image(`${id}-2`, id, nodeId));
        await store.images.finish({ ...image(`${id}-2`, id, nodeId), ready: true });
      }

      const host = fakeRuntime({
        running: new Map<string, RuntimeState>([
          ["unit-mine-live", "running"],
          ["unit-theirs-live", "running"],
        ]),
        deleting: ["unit-mine-deleting", "unit-theirs-deleting"],
        disks: ["unit-mine-gone", "unit-theirs-running"],
      });
      const life = lifecycle(host.runtime, MINE);
      await life.start();
      await life.stop();

      assert.equal(await statusOf("theirs-running"), "running", "another node's running unit is left running");
      assert.equal(await statusOf("theirs-warm"), "warm");
      assert.equal(await statusOf("theirs-live"), "warm", "its container here does not make it this node's");
      assert.equal(await statusOf("mine-gone"), "cold", "this node's unit that no longer runs is stopped");
      assert.equal(await statusOf("unplaced"), "cold", "a unit naming no node is this node's to claim");
      assert.equal(await statusOf("mine-live"), "running", "this node's running container is re-adopted");
      assert.deepEqual(
        life.tracked().map((t) => t.unitId),
        ["unit-mine-live"],
      );
      assert.ok(host.calls.includes("stop unit-theirs-live"), "a container of another node's unit is stopped");
      assert.ok(!host.calls.includes("stop unit-mine-live"));

      // The deletes this host's tombstones say: the disks go, the record only when it is this node's.
      assert.ok(
        host.calls.includes("destroy unit-mine-deleting") && host.calls.includes("destroy unit-theirs-deleting"),
      );
      assert.equal(await statusOf("mine-deleting"), undefined);
      assert.equal(await statusOf("theirs-deleting"), "cold", "another node's record is not deleted");

      // Checkpoint work a crash cut is recovered for this node's units alone.
      assert.ok(host.known.get("unit-mine-gone") !== undefined, "this node's disk is recovered");
      assert.ok(host.known.has("unit-theirs-running"));
      assert.equal(host.known.get("unit-theirs-running"), undefined, "another node's disk is left alone");

      const templates = (await store.templates.all()).map((t) => t.id);
      assert.ok(!templates.includes("tpl-mine"), "this node's half-made template is removed");
      assert.ok(templates.includes("tpl-theirs"), "another node's template under way is kept");
      assert.ok(host.calls.includes("deleteTemplate tpl-mine") && !host.calls.includes("deleteTemplate tpl-theirs"));
      const images = (await store.images.all()).map((i) => i.id);
      assert.ok(!images.includes("img-mine") && !images.includes("img-old-mine"), "this node's are removed");
      assert.ok(images.includes("img-theirs") && images.includes("img-old-theirs"), "another node's are kept");
      assert.ok(!host.calls.some((c) => c.startsWith("deleteImage img-theirs") || c === "deleteImage img-old-theirs"));
    });

    it("names itself in the templates and images it makes", async () => {
      const src = await unit("tpl-src", MINE, "cold");
      const host = fakeRuntime({ running: new Map(), deleting: [], disks: [] });
      const life = lifecycle(host.runtime, MINE);
      const cp = {
        unitId: src.id,
        id: "v0",
        seq: 0,
        comment: "",
        sourceId: null,
        resources: "{}",
        privileges: "{}",
        network: '{"rules":[]}',
        createdAt: new Date().toISOString(),
        auto: false,
      };
      const t = await life.templates.publish(src as UnitRecord, cp, { name: "made-here", description: "" });
      assert.equal(t.nodeId, MINE);
      assert.equal((await store.templates.get(org.id, "made-here"))?.nodeId, MINE);
      const i = await life.images.build(org.id, { name: "built-here" }, "recipe:x", { progress: () => {} });
      assert.equal(i.nodeId, MINE);
      assert.equal((await store.images.get(org.id, "built-here"))?.nodeId, MINE);
    });
  });
}
