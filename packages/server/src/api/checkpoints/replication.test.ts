import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { unitObjects } from "../../node/local/replicator.js";
import { importCheckpoint } from "../../replication/index.js";
import { poolScratch, startTestS3, type TestS3 } from "../../replication/test-fixtures.js";
import { execHttp } from "../../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

interface Info {
  id: string;
  replication?: { state: string; bytes?: number; parent_id?: string; error?: string; time?: string };
}

/** Issue #15 part 4: checkpoints copied to an S3-compatible store (s3rver on loopback) in the background. */
describe("checkpoints in object storage", () => {
  const bucket = "ums-api-test";
  let s3: TestS3;
  let s: TestServer;
  let token: string;
  let unitId: string;
  const sh = (script: string) => execHttp(s.url, token, "box", ["sh", "-c", script]);
  const checkpoint = async () => {
    const r = await s.api("POST", "/v1/units/box/checkpoint", { token, json: {} });
    assert.equal(r.status, 200, r.text);
    const id = /checkpoint (v\d+) created/.exec(r.text)?.[1];
    assert.ok(id, r.text);
    return id;
  };
  const list = async (unit = "box"): Promise<Info[]> => {
    const r = await s.api("GET", `/v1/units/${unit}/checkpoints`, { token });
    assert.equal(r.status, 200, r.text);
    return r.body as Info[];
  };
  /** The unit's checkpoint's info once its copy is no longer pending (30 s at most). */
  const settled = async (id: string, unit = "box"): Promise<Info> => {
    for (let i = 0; ; i++) {
      const cp = (await list(unit)).find((c) => c.id === id);
      assert.ok(cp?.replication, `checkpoint ${id} has no replication: ${JSON.stringify(cp)}`);
      if (cp.replication.state !== "pending") return cp;
      assert.ok(i < 300, `checkpoint ${id}'s copy is still pending`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stored = async () =>
    (await unitObjects(s3.store, unitId).list("checkpoints/"))
      .map((o) => o.key)
      .filter((k) => k.endsWith("manifest.json"));

  before(async () => {
    s3 = await startTestS3({ bucket });
    Object.assign(process.env, s3.env);
    s = await startSqliteServer({ objectStore: s3.url });
    token = await s.token("repl");
    unitId = await s.unit(token, "box");
  });
  after(async () => {
    await s?.close();
    await s3?.stop();
  });

  it("copies each checkpoint after it is taken, incremental against the one before, and the copy restores elsewhere", async () => {
    assert.equal((await sh("echo first > /home/unit/f; head -c 2000000 /dev/urandom > /home/unit/big")).exitCode, 0);
    const v0 = await checkpoint();
    const first = await settled(v0);
    assert.equal(first.replication?.state, "replicated", JSON.stringify(first));
    assert.ok((first.replication?.bytes ?? 0) > 1_000_000, "the first copy holds the unit's files");
    assert.equal(first.replication?.parent_id, undefined);
    assert.match(first.replication?.time ?? "", /^\d{4}-\d\d-\d\dT/);

    assert.equal((await sh("echo second > /home/unit/f")).exitCode, 0);
    const v1 = await checkpoint();
    const second = await settled(v1);
    assert.equal(second.replication?.state, "replicated", JSON.stringify(second));
    assert.equal(second.replication?.parent_id, v0);
    assert.ok((second.replication?.bytes ?? 0) < 200_000, `an incremental copy is small: ${second.replication?.bytes}`);
    assert.deepEqual(await stored(), [`checkpoints/${v0}/manifest.json`, `checkpoints/${v1}/manifest.json`]);

    // What another node would do: receive the chain from the store into a directory of its own.
    const scratch = await poolScratch("repl-api");
    try {
      const r = await importCheckpoint({
        store: unitObjects(s3.store, unitId),
        checkpointId: v1,
        destDir: scratch.dir,
      });
      assert.deepEqual(r.received, [v0, v1]);
      assert.equal(await readFile(join(scratch.dir, v1, "home/unit/f"), "utf8"), "second\n");
      assert.equal(await readFile(join(scratch.dir, v0, "home/unit/f"), "utf8"), "first\n");
    } finally {
      await scratch.remove();
    }
  });

  it("a failed copy says so without the store's address, and is taken up again (as at the next start)", async () => {
    // The store goes away; the next checkpoint's copy fails.
    await s3.stop({ keepFiles: true });
    const v2 = await checkpoint();
    const failed = await settled(v2);
    assert.equal(failed.replication?.state, "failed", JSON.stringify(failed));
    assert.match(failed.replication?.error ?? "", /^the copy failed \(STORE_FAILED\); the server log says why/);
    assert.ok(!failed.replication?.error?.includes("127.0.0.1"), "the store's address is not shown");

    // Back on the same port and files: what a start does, resume, copies it.
    s3 = await startTestS3({ bucket, restart: s3 });
    const node = s.server.node;
    assert.equal(await node.replicator?.resume(), 1);
    const done = await settled(v2);
    assert.equal(done.replication?.state, "replicated", JSON.stringify(done));
    assert.equal(done.replication?.parent_id, "v1");
  });

  it("a deleted checkpoint's copy goes once no other copy is incremental against it; a deleted unit's copies all go", async () => {
    const before = await stored();
    assert.deepEqual(before, [
      "checkpoints/v0/manifest.json",
      "checkpoints/v1/manifest.json",
      "checkpoints/v2/manifest.json",
    ]);
    // v1 is v2's parent: its copy stays while v2's checkpoint does.
    assert.equal((await s.api("DELETE", "/v1/units/box/checkpoints/v1", { token })).status, 204);
    assert.deepEqual(await stored(), before);
    // A restore's backup (v3, of the files on v2) is copied too, incremental against v2.
    const restored = await s.api("POST", "/v1/units/box/checkpoints/v0/restore", { token, json: {} });
    assert.equal(restored.status, 200, restored.text);
    const backup = await settled("v3");
    assert.equal(backup.replication?.state, "replicated", JSON.stringify(backup));
    assert.equal(backup.replication?.parent_id, "v2");
    // Nothing is incremental against v3: its copy goes with it.
    assert.equal((await s.api("DELETE", "/v1/units/box/checkpoints/v3", { token })).status, 204);
    assert.deepEqual(await stored(), before);
    // v2 gone: v1's and v2's copies are needed by nothing left.
    assert.equal((await s.api("DELETE", "/v1/units/box/checkpoints/v2", { token })).status, 204);
    assert.deepEqual(await stored(), ["checkpoints/v0/manifest.json"]);
    assert.equal((await s.api("DELETE", "/v1/units/box", { token })).status, 204);
    assert.deepEqual(await s3.store.list(`units/${unitId}/`), []);
    assert.equal(existsSync(join(s.config.dataDir, "replication", unitId)), false, "its upload state went too");
  });

  it("a checkpoint whose snapshot is gone from the node is received from the store for a restore and a fork", async () => {
    const id = await s.unit(token, "lost");
    const run = (script: string) => execHttp(s.url, token, "lost", ["sh", "-c", script]);
    const take = async () => {
      const r = await s.api("POST", "/v1/units/lost/checkpoint", { token, json: {} });
      const cp = /checkpoint (v\d+) created/.exec(r.text)?.[1];
      assert.ok(cp, r.text);
      return cp;
    };
    const infos = async () => (await list("lost")) as (Info & { health: string })[];
    const replicated = async (cp: string) =>
      assert.equal((await settled(cp, "lost")).replication?.state, "replicated", `${cp} was not copied`);
    assert.equal((await run("echo zero > /home/unit/f")).exitCode, 0);
    const v0 = await take();
    await replicated(v0);
    assert.equal((await run("echo one > /home/unit/f")).exitCode, 0);
    const v1 = await take();
    await replicated(v1);

    // v0's snapshot is lost on the node; its row and its copy remain: it still shows as healthy.
    const runtime = s.server.runtime;
    await runtime.deleteCheckpoint(id, v0);
    assert.equal(runtime.hasCheckpoint(id, v0), false);
    assert.equal((await infos()).find((c) => c.id === v0)?.health, "");

    const restored = await s.api("POST", `/v1/units/lost/checkpoints/${v0}/restore`, { token, json: {} });
    assert.equal(restored.status, 200, restored.text);
    assert.match(restored.text, /not on this node: receiving it from the object store/);
    assert.match(restored.text, /"complete"/);
    assert.equal((await run("cat /home/unit/f")).stdout.toString(), "zero\n");
    assert.equal(runtime.hasCheckpoint(id, v0), true);

    // v1 (incremental against v0 in the store) lost too: a fork of it receives it against v0.
    await runtime.deleteCheckpoint(id, v1);
    const fork = await s.api("POST", "/v1/units", {
      token,
      json: { name: "found", from: { unit: "lost", checkpoint: v1 } },
    });
    assert.equal(fork.status, 201, fork.text);
    assert.equal((await execHttp(s.url, token, "found", ["cat", "/home/unit/f"])).stdout.toString(), "one\n");
    for (const u of ["found", "lost"]) assert.equal((await s.api("DELETE", `/v1/units/${u}`, { token })).status, 204);
    assert.deepEqual(await s3.store.list(`units/${id}/`), []);
  });

  it("a checkpoint that cannot be received (its stored stream is gone) fails the restore, saying so without the store's address, and changes nothing", async () => {
    const id = await s.unit(token, "broken");
    const run = (script: string) => execHttp(s.url, token, "broken", ["sh", "-c", script]);
    assert.equal((await run("echo kept > /home/unit/f")).exitCode, 0);
    const r = await s.api("POST", "/v1/units/broken/checkpoint", { token, json: {} });
    assert.match(r.text, /checkpoint v0 created/);
    assert.equal((await settled("v0", "broken")).replication?.state, "replicated", "v0 was not copied");
    assert.equal((await run("echo changed > /home/unit/f")).exitCode, 0);
    await s.server.runtime.deleteCheckpoint(id, "v0");
    await unitObjects(s3.store, id).deleteObject("checkpoints/v0/stream.btrfs.zst");
    const restored = await s.api("POST", "/v1/units/broken/checkpoints/v0/restore", { token, json: {} });
    const last = JSON.parse(restored.text.trim().split("\n").at(-1) ?? "{}");
    assert.equal(last.type, "error", restored.text);
    assert.match(
      last.error,
      /^checkpoint v0 is not on this node, and receiving it from the object store failed \((NOT_FOUND|TRUNCATED)\); nothing was changed/,
    );
    assert.ok(!restored.text.includes("127.0.0.1"), "the store's address is not shown");
    // Nothing changed: no backup was taken, the files are the unit's own, no partial snapshot is left.
    assert.equal((await run("cat /home/unit/f")).stdout.toString(), "changed\n");
    assert.deepEqual(
      (await list("broken")).map((c) => c.id),
      ["v0"],
    );
    assert.equal(s.server.runtime.hasCheckpoint(id, "v0"), false);
    assert.equal((await s.api("DELETE", "/v1/units/broken", { token })).status, 204);
  });
});
