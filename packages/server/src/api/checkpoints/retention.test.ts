import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { unitObjects } from "../../node/local/replicator.js";
import { startTestS3, type TestS3 } from "../../replication/test-fixtures.js";
import { execHttp } from "../../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

interface Info {
  id: string;
  health: string;
  active: boolean;
  local?: boolean;
  replication?: { state: string; error?: string };
}

/**
 * Issue #15 part 4, retention: with --local-checkpoints 2 a node keeps each unit's two newest
 * checkpoints and evicts older ones once the object store (s3rver on loopback) holds them; a
 * restore, a fork or a template of an evicted one receives it from the store.
 */
describe("retention of stored checkpoints (--local-checkpoints)", () => {
  const bucket = "ums-retention-test";
  let s3: TestS3;
  let s: TestServer;
  let token: string;
  let unitId: string;

  const sh = (unit: string, script: string) => execHttp(s.url, token, unit, ["sh", "-c", script]);
  const read = async (unit: string) => {
    const r = await sh(unit, "cat /home/unit/f");
    assert.equal(r.exitCode, 0, r.stderr.toString());
    return r.stdout.toString();
  };
  const checkpoint = async (unit = "keep") => {
    const r = await s.api("POST", `/v1/units/${unit}/checkpoint`, { token, json: {} });
    assert.equal(r.status, 200, r.text);
    const id = /checkpoint (v\d+) created/.exec(r.text)?.[1];
    assert.ok(id, r.text);
    return id;
  };
  const list = async (unit = "keep"): Promise<Info[]> => {
    const r = await s.api("GET", `/v1/units/${unit}/checkpoints`, { token });
    assert.equal(r.status, 200, r.text);
    return r.body as Info[];
  };
  /** Polls the listing (30 s at most) until `ok` holds of it; the last listing in the failure. */
  const until = async (what: string, ok: (cps: Info[]) => boolean, unit = "keep"): Promise<Info[]> => {
    for (let i = 0; ; i++) {
      const cps = await list(unit);
      if (ok(cps)) return cps;
      assert.ok(i < 300, `${what}: ${JSON.stringify(cps)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const settled = (cps: Info[]) => cps.every((c) => c.replication?.state !== "pending");
  /** id → local, as the listing says. */
  const localOf = (cps: Info[]) => Object.fromEntries(cps.map((c) => [c.id, c.local]));
  /** id → whether its snapshot is in the runtime's checkpoint directory of the unit. */
  const onDisk = (id: string, cps: readonly string[]) => {
    const dir = s.server.runtime.checkpointDir(id);
    return Object.fromEntries(cps.map((c) => [c, existsSync(join(dir, c))]));
  };
  const stored = async (id: string) =>
    (await unitObjects(s3.store, id).list("checkpoints/"))
      .map((o) => o.key)
      .filter((k) => k.endsWith("manifest.json"))
      .sort();

  before(async () => {
    s3 = await startTestS3({ bucket });
    Object.assign(process.env, s3.env);
    s = await startSqliteServer({
      objectStore: s3.url,
      localCheckpoints: 2,
    });
    token = await s.token("retention");
    unitId = await s.unit(token, "keep");
  });
  after(async () => {
    await s?.close();
    await s3?.stop();
  });

  it("keeps the two newest snapshots and evicts older ones once stored; restore, fork and publish of evicted ones receive them", async () => {
    for (let i = 0; i < 4; i++) {
      assert.equal((await sh("keep", `echo content-${i} > /home/unit/f`)).exitCode, 0);
      assert.equal(await checkpoint(), `v${i}`);
    }
    let cps = await until("every copy is stored and v0, v1 are evicted", (c) => {
      const l = localOf(c);
      return settled(c) && l.v0 === false && l.v1 === false;
    });
    assert.ok(
      cps.every((c) => c.replication?.state === "replicated"),
      JSON.stringify(cps),
    );
    assert.deepEqual(localOf(cps), { v0: false, v1: false, v2: true, v3: true });
    assert.deepEqual(onDisk(unitId, ["v0", "v1", "v2", "v3"]), { v0: false, v1: false, v2: true, v3: true });
    // Evicted, but restorable: the store holds them.
    assert.ok(
      cps.every((c) => c.health === ""),
      JSON.stringify(cps),
    );
    assert.equal((await s.api("GET", "/v1/units/keep/checkpoints/v0", { token })).body.local, false);

    // The oldest comes back from the store for a restore.
    const restored = await s.api("POST", "/v1/units/keep/checkpoints/v0/restore", { token, json: {} });
    assert.equal(restored.status, 200, restored.text);
    assert.match(restored.text, /checkpoint v0 is not on this node: receiving it from the object store/);
    assert.match(restored.text, /"type":"complete"/);
    assert.equal(await read("keep"), "content-0\n");
    // The restore's backup v4 (content-3) is stored; v3 and v4 are the two newest, v0 is the unit's
    // files now: v2 goes.
    cps = await until("v4 is stored and v2 evicted", (c) => settled(c) && localOf(c).v2 === false);
    assert.deepEqual(localOf(cps), { v0: true, v1: false, v2: false, v3: true, v4: true });
    assert.deepEqual(onDisk(unitId, ["v0", "v1", "v2", "v3", "v4"]), {
      v0: true,
      v1: false,
      v2: false,
      v3: true,
      v4: true,
    });
    assert.equal(cps.find((c) => c.id === "v0")?.active, true);

    // A fork of an evicted one (v1, stored against v0): received, copied, and evicted again.
    const fork = await s.api("POST", "/v1/units", {
      token,
      json: { name: "kept-fork", from: { unit: "keep", checkpoint: "v1" } },
    });
    assert.equal(fork.status, 201, fork.text);
    assert.equal(await read("kept-fork"), "content-1\n");
    await until("v1 is evicted again after the fork", (c) => localOf(c).v1 === false);
    assert.equal(onDisk(unitId, ["v1"]).v1, false);

    // A template published from an evicted one (v2), and a unit made from it.
    const tpl = await s.api("POST", "/v1/templates", {
      token,
      json: { name: "from-evicted", from: { unit: "keep", checkpoint: "v2" } },
    });
    assert.equal(tpl.status, 201, tpl.text);
    const made = await s.api("POST", "/v1/units", { token, json: { name: "kept-tpl", template: "from-evicted" } });
    assert.equal(made.status, 201, made.text);
    assert.equal(await read("kept-tpl"), "content-2\n");
    await until("v2 is evicted again after the publish", (c) => localOf(c).v2 === false);

    for (const u of ["kept-fork", "kept-tpl"]) {
      assert.equal((await s.api("DELETE", `/v1/units/${u}`, { token })).status, 204);
    }
    assert.equal((await s.api("DELETE", "/v1/templates/from-evicted", { token })).status, 204);
    // The files of the unit are as they were restored.
    assert.equal(await read("keep"), "content-0\n");
  });

  it("never evicts a checkpoint the store does not hold: copies that failed (the store away), or a stored copy that went missing", async () => {
    const before = await list();
    assert.equal(before.length, 5);
    // The store goes away: the next copies fail, and every one of them stays on the node.
    await s3.stop({ keepFiles: true });
    const taken: string[] = [];
    for (let i = 5; i < 8; i++) {
      assert.equal((await sh("keep", `echo content-${i} > /home/unit/f`)).exitCode, 0);
      taken.push(await checkpoint());
    }
    assert.deepEqual(taken, ["v5", "v6", "v7"]);
    let cps = await until("the copies fail", settled);
    for (const id of taken) {
      const c = cps.find((x) => x.id === id);
      assert.equal(c?.replication?.state, "failed", JSON.stringify(c));
      assert.equal(c?.local, true, `${id} stays on the node`);
      assert.equal(c?.health, "");
    }
    // What was stored before keeps its place: v3 and v4 stay too (the newest stored, the next
    // copies' parent), v0 is the active one.
    assert.deepEqual(onDisk(unitId, ["v0", "v3", "v4", "v5", "v6", "v7"]), {
      v0: true,
      v3: true,
      v4: true,
      v5: true,
      v6: true,
      v7: true,
    });

    // The store is back, but v3's stored copy has gone from it (someone emptied part of the bucket):
    // its row still says replicated; the node does not take the row's word for it.
    s3 = await startTestS3({ bucket, restart: s3 });
    await unitObjects(s3.store, unitId).deleteObject("checkpoints/v3/manifest.json");
    // The copies are taken up again, as at the next start.
    assert.equal(await s.server.node.replicator?.resume(), 3);
    cps = await until(
      "the copies are stored and v0, v5 evicted",
      (c) => settled(c) && localOf(c).v0 === false && localOf(c).v5 === false,
    );
    assert.ok(
      cps.every((c) => c.replication?.state === "replicated"),
      JSON.stringify(cps),
    );
    // v6 and v7 are the newest (v7 the active one); v3 stays, its copy missing from the store, and
    // v4 too, its stored stream incremental against v3's.
    assert.deepEqual(localOf(cps), {
      v0: false,
      v1: false,
      v2: false,
      v3: true,
      v4: true,
      v5: false,
      v6: true,
      v7: true,
    });
    assert.deepEqual(onDisk(unitId, ["v0", "v3", "v4", "v5", "v6", "v7"]), {
      v0: false,
      v3: true,
      v4: true,
      v5: false,
      v6: true,
      v7: true,
    });
    // Evicted with v5's copy incremental against it, v0 comes back for a restore of v5.
    const restored = await s.api("POST", "/v1/units/keep/checkpoints/v5/restore", { token, json: {} });
    assert.equal(restored.status, 200, restored.text);
    assert.match(restored.text, /"type":"complete"/);
    assert.equal(await read("keep"), "content-5\n");
  });

  it("a checkpoint, and then its unit, deleted while their copy to the store is under way: the copy stops first", async () => {
    const id = await s.unit(token, "copying");
    // Enough for the copy to s3rver to take a while.
    assert.equal((await sh("copying", "head -c 150M /dev/urandom > /home/unit/big")).exitCode, 0);
    assert.equal(await checkpoint("copying"), "v0");
    assert.equal((await sh("copying", "echo after > /home/unit/f")).exitCode, 0);
    assert.equal(await checkpoint("copying"), "v1");
    const during = await list("copying");
    assert.equal(during.find((c) => c.id === "v0")?.replication?.state, "pending", JSON.stringify(during));
    // btrfs refuses to delete a snapshot a `btrfs send` reads (EPERM): the copy stops first.
    const gone = await s.api("DELETE", "/v1/units/copying/checkpoints/v0", { token });
    assert.equal(gone.status, 204, gone.text);
    assert.equal(onDisk(id, ["v0"]).v0, false);
    const left = await list("copying");
    assert.deepEqual(
      left.map((c) => c.id),
      ["v1"],
    );
    assert.equal(left[0]?.replication?.state, "pending", "v1's copy is under way, or next");
    const deleted = await s.api("DELETE", "/v1/units/copying", { token });
    assert.equal(deleted.status, 204, deleted.text);
    assert.equal(existsSync(dirname(s.server.runtime.checkpointDir(id))), false, "nothing of the unit is left");
    for (let i = 0; i < 100 && (await stored(id)).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(await stored(id), []);
  });

  it("deleting a unit with evicted checkpoints leaves nothing on the node and deletes its copies", async () => {
    assert.ok((await stored(unitId)).length > 0);
    assert.equal((await s.api("DELETE", "/v1/units/keep", { token })).status, 204);
    assert.deepEqual(await s3.store.list(`units/${unitId}/`), []);
    const dir = s.server.runtime.checkpointDir(unitId);
    assert.equal(existsSync(dir), false, "its checkpoints went");
    assert.equal(existsSync(dirname(dir)), false, "its disk went");
    assert.equal(existsSync(join(s.config.dataDir, "replication", unitId)), false, "its upload state went");
  });
});
