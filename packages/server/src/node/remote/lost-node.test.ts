import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startTestS3, type TestS3 } from "../../replication/test-fixtures.js";
import { testImage } from "../../runtime/image/test-image.js";
import { testDialects } from "../../testing/dialects.js";
import { execHttp } from "../../testing/exec-client.js";
import { openOwnPool } from "../../testing/own-pool.js";
import { UMS_BIN } from "../../testing/serve-process.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import type { LocalNode } from "../local/local-node.js";

const pg = testDialects.find((d) => d.name === "postgres");

/**
 * Issue #15 (docs/SCALE-OUT.md, "A node lost for good"): `ums node drain NAME --from-store` makes
 * the units of a node that is down again on another node, each from its newest checkpoint in the
 * object store. Node `ra` (the shared test pool) holds the units and is stopped as if its host were
 * lost; node `rb` (`--role all`: the API too, with a pool of its own) takes them.
 */
describe("a node lost for good: its units made again from the object store", { timeout: 300_000, skip: !pg }, () => {
  let db: { databaseUrl: string | undefined; drop(): Promise<void> };
  let ra: TestServer;
  let rb: TestServer;
  let token: string;
  let s3: TestS3;
  let rbPool: Awaited<ReturnType<typeof openOwnPool>> | undefined;
  const secret = randomBytes(32).toString("hex");
  const s3Options = { bucket: "lost", keyPrefix: "" };

  const ums = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        UMS_BIN,
        args,
        { env: { ...process.env, UMS_DATABASE_URL: db.databaseUrl, UMS_NODE_SECRET: secret }, timeout: 120_000 },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const row = async (name: string) => {
    const org = await rb.server.store.orgs.getBySlug("lost");
    return rb.server.store.units.get(org?.id ?? "", name);
  };
  const nodeId = async (name: string) => (await rb.server.store.nodes.getByName(name))?.id as string;

  before(async () => {
    if (!pg) return;
    db = await pg.createDatabase();
    const databaseUrl = db.databaseUrl as string;
    s3 = await startTestS3(s3Options);
    Object.assign(process.env, s3.env);
    const objectStore = s3.url;
    ra = await startTestServer(pg, {
      objectStore,
      cluster: { role: "node", databaseUrl, secret, nodeListen: "127.0.0.1:0", nodeName: "ra" },
    });
    rbPool = await openOwnPool(1536 * 1024 * 1024);
    rb = await startTestServer(pg, {
      objectStore,
      pool: rbPool.pool,
      cluster: { role: "all", databaseUrl, secret, nodeListen: "127.0.0.1:0", nodeName: "rb" },
    });
    token = await rb.token("lost");
  });
  after(async () => {
    const failures: unknown[] = [];
    const steps = [() => rb?.close(), () => ra?.close(), () => rbPool?.close(), () => db?.drop(), () => s3?.stop()];
    for (const done of steps) {
      await Promise.resolve()
        .then(done)
        .catch((err: unknown) => failures.push(err));
    }
    if (failures.length > 0) throw new AggregateError(failures, "the deployment's cleanup failed");
  });

  it("makes a stored unit again on the other node without what changed after its checkpoint; reports one with nothing stored; the lost node keeps nothing of it when it is back", async () => {
    // Both units on ra (rb takes none while cordoned).
    await rb.server.store.nodes.setState("rb", "cordoned");
    for (const name of ["kept", "bare"]) await rb.unit(token, name);
    await rb.server.store.nodes.setState("rb", "active");
    const raId = await nodeId("ra");
    const rbId = await nodeId("rb");
    for (const name of ["kept", "bare"]) assert.equal((await row(name))?.nodeId, raId);

    const first = await execHttp(rb.url, token, "kept", ["sh", "-c", "echo first > /home/unit/first"]);
    assert.equal(first.exitCode, 0, first.stderr.toString());
    const cp = await rb.api("POST", "/v1/units/kept/checkpoint", { token, json: {} });
    const id = /checkpoint (v\d+) created/.exec(cp.text)?.[1];
    assert.ok(id, cp.text);
    for (let i = 0; ; i++) {
      const state = (await rb.server.store.checkpoints.get((await row("kept"))?.id ?? "", id))?.replica?.state;
      if (state === "replicated") break;
      assert.ok(i < 600 && state !== "failed", `checkpoint ${id} copy: ${state}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const second = await execHttp(rb.url, token, "kept", ["sh", "-c", "echo second > /home/unit/second"]);
    assert.equal(second.exitCode, 0);
    assert.equal((await execHttp(rb.url, token, "bare", ["true"])).exitCode, 0);

    // While ra is up: refused, saying to drain it plainly.
    const up = await ums(["node", "drain", "ra", "--from-store"]);
    assert.equal(up.code, 2, up.stderr + up.stdout);
    assert.match(up.stderr, /node 'ra' is up \(heartbeat .*\): drain it without --from-store/);

    // ra is lost: its process gone (its units' containers keep running, as on a host cut off), its
    // last heartbeat 20 s old (what waiting out the 15 s would show).
    await ra.stop();
    const raRow = await rb.server.store.nodes.get(raId);
    assert.ok(raRow);
    await rb.server.store.nodes.heartbeat(raId, raRow.free, new Date(Date.now() - 20_000).toISOString());

    const plain = await ums(["node", "drain", "ra"]);
    assert.equal(plain.code, 2, plain.stderr + plain.stdout);
    assert.match(plain.stderr, /node 'ra' is down .*if it is lost for good, 'ums node drain ra --from-store'/);

    const out = await ums(["node", "drain", "ra", "--from-store", "--json"]);
    assert.equal(out.code, 1, out.stderr + out.stdout);
    const lines = out.stdout
      .trim()
      .split("\n")
      .map(
        (l) => JSON.parse(l) as { unit: string; moved: boolean; node?: string; checkpoint?: string; error?: string },
      );
    const byUnit = new Map(lines.map((l) => [l.unit, l]));
    assert.deepEqual([...byUnit.keys()].sort(), ["bare", "kept"]);
    assert.equal(byUnit.get("kept")?.moved, true, out.stdout);
    assert.equal(byUnit.get("kept")?.node, "rb");
    assert.equal(byUnit.get("kept")?.checkpoint, id);
    assert.equal(byUnit.get("bare")?.moved, false);
    assert.match(byUnit.get("bare")?.error ?? "", /no checkpoint of its files is in the object store: it stays on ra/);
    const kept = await row("kept");
    assert.deepEqual([kept?.nodeId, kept?.status, kept?.activeCheckpoint], [rbId, "cold", id]);
    assert.equal((await row("bare"))?.nodeId, raId, "a unit with nothing stored stays where it was");
    assert.equal((await rb.server.store.nodes.get(raId))?.state, "cordoned");
    // What is left of ra has nothing in the store: refused whole.
    const again = await ums(["node", "drain", "ra", "--from-store"]);
    assert.equal(again.code, 2, again.stderr + again.stdout);
    assert.match(again.stderr, /node 'ra' has 1 units and none has a checkpoint in the object store/);

    // It boots on rb with the checkpoint's files; what changed after the checkpoint is lost.
    const files = await execHttp(rb.url, token, "kept", [
      "sh",
      "-c",
      "cat /home/unit/first; test -e /home/unit/second && echo second || echo no second",
    ]);
    assert.equal(files.status, 200, files.body.toString());
    assert.equal(files.stdout.toString(), "first\nno second\n", files.stderr.toString());
    assert.equal(rb.server.lifecycle.statusOf(kept?.id ?? ""), "running");

    // ra is back: it neither runs nor keeps the unit (its container stopped, its disk retired but
    // the snapshot of its stored checkpoint), and runs its own unit again.
    await ra.restart();
    const raNode = ra.server.node as LocalNode;
    const keptId = kept?.id ?? "";
    assert.equal((await raNode.runtime.running()).has(keptId), false);
    assert.equal(ra.server.lifecycle.statusOf(keptId), "cold");
    assert.ok((await raNode.runtime.retired()).includes(keptId));
    const raDir = join((await testImage()).pool.path, "units", keptId);
    assert.equal(existsSync(join(raDir, "rootfs")), false, "ra's files of the unit are gone");
    assert.deepEqual(readdirSync(join(raDir, "checkpoints")), [id]);
    assert.deepEqual(await rb.server.store.nodes.leftUnits(raId), []);
    const still = await execHttp(rb.url, token, "kept", ["cat", "/home/unit/first"]);
    assert.equal(still.stdout.toString(), "first\n");
    assert.equal(rb.server.lifecycle.statusOf(keptId), "running");
    assert.equal((await execHttp(rb.url, token, "bare", ["true"])).exitCode, 0);

    for (const name of ["kept", "bare"]) {
      assert.equal((await rb.api("DELETE", `/v1/units/${name}`, { token })).status, 204);
    }
    await raNode.sweepRetired();
    assert.equal(existsSync(raDir), false, "nothing of the unit is left on ra");
    assert.equal(existsSync(join(rbPool?.pool.path as string, "units", keptId)), false, "nor on rb");
  });
  it("a checkpoint moved before its node stored it is stored by the node it moved to once its own node is lost, not before", async () => {
    const rbStore = rb.server.store;
    await rbStore.nodes.setState("ra", "active");
    await rbStore.nodes.setState("rb", "cordoned");
    await rb.unit(token, "moved");
    await rbStore.nodes.setState("rb", "active");
    const raId = await nodeId("ra");
    const rbId = await nodeId("rb");
    const unitId = (await row("moved"))?.id as string;
    assert.equal((await row("moved"))?.nodeId, raId);
    const wrote = await execHttp(rb.url, token, "moved", ["sh", "-c", "echo kept > /home/unit/f"]);
    assert.equal(wrote.exitCode, 0, wrote.stderr.toString());

    // The store is away: ra cannot copy the move's checkpoint (it tries after the move, and fails).
    await s3.stop({ keepFiles: true });
    const move = await rb.api("POST", "/v1/units/moved/move", { token, json: { node: "rb" } });
    assert.equal(move.status, 200, move.text);
    assert.match(move.text, /"type":"complete"/, move.text);
    assert.equal((await row("moved"))?.nodeId, rbId);
    const cp = (await rbStore.checkpoints.list(unitId)).at(-1);
    assert.ok(cp, "the move's checkpoint");
    for (let i = 0; ; i++) {
      const replica = (await rbStore.checkpoints.get(unitId, cp.id))?.replica;
      if (replica?.state === "failed") {
        assert.equal(replica.by, raId, "ra, where it was taken, copies it");
        break;
      }
      assert.ok(i < 900, `ra's copy of ${cp.id} did not fail: ${JSON.stringify(replica)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const rbNode = rb.server.node as LocalNode;
    assert.equal(await rbNode.replicator?.adopt(), 0, "rb leaves it to ra while ra is up");

    // ra is lost before it could store it; the store is back: rb adopts the copy.
    await ra.stop();
    const raRow = await rbStore.nodes.get(raId);
    assert.ok(raRow);
    await rbStore.nodes.heartbeat(raId, raRow.free, new Date(Date.now() - 20_000).toISOString());
    // At the address ra's and rb's --object-store name, with what it held.
    s3 = await startTestS3({ ...s3Options, restart: s3 });
    assert.equal(await rbNode.replicator?.adopt(), 1);
    for (let i = 0; ; i++) {
      const replica = (await rbStore.checkpoints.get(unitId, cp.id))?.replica;
      if (replica?.state === "replicated") {
        assert.equal(replica.by, rbId, "copied by rb");
        break;
      }
      // ra's failure shows until rb's copy begins.
      assert.ok(
        i < 900 && !(replica?.state === "failed" && replica.by === rbId),
        `rb's copy of ${cp.id}: ${JSON.stringify(replica)}`,
      );
      await new Promise((r) => setTimeout(r, 100));
    }
    // ra back: the copy is made; it makes none of its own.
    await ra.restart();
    assert.equal((await rbStore.checkpoints.get(unitId, cp.id))?.replica?.by, rbId);
    const files = await execHttp(rb.url, token, "moved", ["cat", "/home/unit/f"]);
    assert.equal(files.stdout.toString(), "kept\n");
    assert.equal((await rb.api("DELETE", "/v1/units/moved", { token })).status, 204);
    await (ra.server.node as LocalNode).sweepRetired();
  });
});
