// Issue #15: `kill -9` of a node in the middle of receiving a checkpoint (from the object store;
// a move's receive from another node takes the same path, replication/receive-check.ts) leaves a
// partial, writable snapshot. The node must never take it for the checkpoint: after the restart it
// is gone, and the checkpoint is received again, whole.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startTestS3, type TestS3 } from "../../replication/test-fixtures.js";
import { testImage } from "../../runtime/image/test-image.js";
import { execHttp } from "../../testing/exec-client.js";
import { cleanupStoppedServer } from "../../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../../testing/serve-process.js";

interface Info {
  id: string;
  local?: boolean;
  replication?: { state: string };
}

describe("kill -9 of a node in the middle of receiving a checkpoint", () => {
  let s3: TestS3 | undefined;
  let server: ServeProcess | undefined;
  let poolDir: string;
  let unitId = "";

  const api = (method: string, path: string, body?: unknown) => (server as ServeProcess).api(method, path, body);
  const sh = async (script: string) => {
    const s = server as ServeProcess;
    const r = await execHttp(s.base, s.token, "rc", ["sh", "-c", script]);
    assert.equal(r.exitCode, 0, `'${script}': ${r.stderr.toString()}`);
    return r.stdout.toString();
  };
  const list = async (): Promise<Info[]> => (await (await api("GET", "/v1/units/rc/checkpoints")).json()) as Info[];
  const checkpoint = async () => {
    const text = await (await api("POST", "/v1/units/rc/checkpoint", {})).text();
    const id = /checkpoint (v\d+) created/.exec(text)?.[1];
    assert.ok(id, text);
    return id;
  };
  const disk = () => join(poolDir, "units", unitId);

  before(async () => {
    poolDir = (await testImage()).pool.path;
    s3 = await startTestS3({ bucket: "ums-receive-crash" });
    server = await prepareServe({
      name: "receive-crash",
      org: "receive-crash",
      env: {
        UMS_OBJECT_STORE: s3.url,
        UMS_LOCAL_CHECKPOINTS: "1",
        ...s3.env,
        UMS_IDLE_WARM: "10m",
      },
    });
    await server.start();
  });

  after(async () => {
    await server?.close(["rc"], (dataDir) => cleanupStoppedServer(dataDir));
    await s3?.stop();
  });

  it("leaves no partial snapshot taken for the checkpoint: the restart removes it, and a restore receives it whole", async () => {
    const s = server as ServeProcess;
    const made = await api("POST", "/v1/units", { name: "rc" });
    assert.equal(made.status, 201);
    unitId = ((await made.json()) as { id: string }).id;
    // Random bytes (several MiB of stream, past the failpoint) and a small file to recognise v0 by.
    await sh("head -c 8000000 /dev/urandom > /home/unit/big; echo zero > /home/unit/f");
    const sum = await sh("sha256sum /home/unit/big");
    assert.equal(await checkpoint(), "v0");
    await sh("echo one > /home/unit/f");
    assert.equal(await checkpoint(), "v1");
    // With --local-checkpoints 1, v0 leaves the node once both copies are stored.
    for (let i = 0; ; i++) {
      const cps = await list();
      const v0 = cps.find((c) => c.id === "v0");
      if (cps.every((c) => c.replication?.state === "replicated") && v0?.local === false) break;
      assert.ok(i < 300, `v0 was not evicted: ${JSON.stringify(cps)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(!existsSync(join(disk(), "checkpoints", "v0")));

    // The node dies while it receives v0 for a restore.
    await s.stop("SIGTERM");
    await s.start({ UMS_FAILPOINTS: "receive.midway" });
    const restore = await api("POST", "/v1/units/rc/checkpoints/v0/restore", {})
      .then((r) => r.text())
      .catch((err: unknown) => String(err));
    assert.ok(!restore.includes('"type":"complete"'), `the restore was to be cut short: ${restore}`);
    await new Promise<void>((resolve) => {
      if (!s.running()) resolve();
      else s.child?.once("exit", () => resolve());
    });
    // What the kill left: the half-received snapshot, and its mark.
    assert.ok(existsSync(join(disk(), "checkpoints", "v0")), "the receive had begun: a partial snapshot is there");
    assert.ok(
      (await readdir(disk())).some((n) => n.startsWith("receiving.")),
      "the partial snapshot is marked as such",
    );

    await s.start();
    assert.ok(!existsSync(join(disk(), "checkpoints", "v0")), "the restart removed the partial snapshot");
    assert.deepEqual(
      (await readdir(disk())).filter((n) => n.startsWith("receiving.")),
      [],
      "and its mark",
    );
    assert.equal((await list()).find((c) => c.id === "v0")?.local, false, "v0 is not on the node");
    // Nothing changed in the unit.
    assert.equal((await sh("cat /home/unit/f")).trim(), "one");

    const again = await (await api("POST", "/v1/units/rc/checkpoints/v0/restore", {})).text();
    assert.match(again, /receiving it from the object store/);
    assert.match(again, /"type":"complete"/);
    assert.equal((await sh("cat /home/unit/f")).trim(), "zero");
    assert.equal(await sh("sha256sum /home/unit/big"), sum);
  });
});
