// Issue #20 part 4: the pool running out of space. A server on a small pool of its own (the test
// image copied in with btrfs send/receive) and a unit whose disk limit is larger than the pool: it
// fills the pool. Then every answer is a clear one (ENOSPC, 507 UMS_POOL_FULL or success, never a
// 500), nothing already written is lost, and once the unit frees space everything works again.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { run } from "../runtime/exec/host-command.js";
import { execHttp } from "../testing/exec-client.js";
import { openOwnPool } from "../testing/own-pool.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

const MiB = 1024 * 1024;

describe("a full pool", { timeout: 300_000 }, () => {
  let own: Awaited<ReturnType<typeof openOwnPool>> | undefined;
  let s: TestServer | undefined;
  let token: string;

  before(async () => {
    own = await openOwnPool(700 * MiB);
    s = await startSqliteServer({ pool: own.pool });
    token = await s.token("full", { limits: { runningLimit: 4 } });
    await s.unit(token, "filler");
    // Its disk may take more than the whole pool: the pool runs out first.
    const set = await s.api("POST", "/v1/units/filler/policy/resources", {
      token,
      json: { disk: { limit_mb: 100_000 } },
    });
    assert.equal(set.status, 200, set.text);
  });
  after(async () => {
    // The pool goes even when the server's cleanup fails (it may fail on what this test breaks).
    try {
      await s?.close();
    } finally {
      await own?.close().catch(() => {});
    }
  });

  const sh = async (unit: string, script: string) => {
    const r = await execHttp(s?.url as string, token, unit, ["sh", "-c", script], { user: "root" });
    return { status: r.status, code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
  };
  /** Not a fault of the server: a success, a refusal the caller can act on, or the pool full (507). */
  const clear = (what: string, r: { status: number; text: string }) => {
    assert.ok(r.status < 500 || r.status === 507, `${what}: ${r.status} ${r.text}`);
    if (r.status === 507) assert.match(r.text, /UMS_POOL_FULL|ENOSPC/, `${what}: ${r.text}`);
    assert.doesNotMatch(r.text, /UMS_INTERNAL/, `${what}: ${r.text}`);
  };

  it("a unit that fills the pool gets ENOSPC; the API answers clearly; nothing written is lost; freeing space heals it", async () => {
    const srv = s as TestServer;
    const keep = await sh("filler", "head -c 1048576 /dev/urandom > /root/keep && sync && sha256sum /root/keep");
    assert.equal(keep.code, 0, keep.out);
    const sum = keep.out.split(" ")[0];
    const cp = await srv.api("POST", "/v1/units/filler/checkpoint", { token, json: { comment: "before full" } });
    assert.equal(cp.status, 200, cp.text);

    const fill = await sh("filler", "dd if=/dev/urandom of=/root/fill bs=1M count=2000 2>&1; echo rc=$?; sync");
    assert.match(fill.out, /No space left on device/, fill.out);
    assert.match(fill.out, /rc=[1-9]/);

    // The API while the pool is full.
    const write = await srv.api(
      "PUT",
      `/v1/units/filler/fs/write?path=${encodeURIComponent("/root/more")}&workingDir=/`,
      { token, body: new Uint8Array(8 * MiB).map((_, i) => (i * 7919) % 251) },
    );
    clear("a file write", write);
    if (write.status === 507) assert.equal(write.body.code, "ENOSPC");
    const full = await srv.api("POST", "/v1/units/filler/checkpoint", { token, json: { comment: "while full" } });
    clear("a checkpoint", full);
    assert.doesNotMatch(full.text, /"type":"error".*UMS_INTERNAL/);
    const created = await srv.api("POST", "/v1/units", { token, json: { name: "late" } });
    clear("a create", created);
    const late = await execHttp(srv.url, token, "late", ["true"]);
    clear("booting a new unit", { status: late.status, text: late.body.toString() });
    assert.equal((await srv.api("GET", "/v1/units/filler", { token })).status, 200);

    // Nothing written before is lost; the unit still runs commands.
    const read = await sh("filler", "sha256sum /root/keep");
    assert.equal(read.code, 0, read.out);
    assert.equal(read.out.split(" ")[0], sum, "the file written before the pool filled is intact");

    // Space freed (the unit goes: its checkpoints keep what it wrote, the one taken while full too):
    // everything works again. The kernel frees a deleted unit's data in the background.
    assert.equal((await srv.api("DELETE", "/v1/units/filler", { token })).status, 204);
    if (created.status !== 201)
      assert.equal((await srv.api("POST", "/v1/units", { token, json: { name: "late" } })).status, 201);
    let booted = await execHttp(srv.url, token, "late", ["true"]);
    for (let i = 0; i < 60 && booted.exitCode !== 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      await run("btrfs", ["filesystem", "sync", own?.pool.path as string]);
      booted = await execHttp(srv.url, token, "late", ["true"]);
    }
    assert.equal(booted.exitCode, 0, `the unit that could not boot boots now: ${booted.status} ${booted.body}`);
    assert.equal((await sh("late", "echo kept > /root/f && sync")).code, 0);
    const cp2 = await srv.api("POST", "/v1/units/late/checkpoint", { token, json: { comment: "after" } });
    assert.equal(cp2.status, 200, cp2.text);
    assert.doesNotMatch(cp2.text, /"type":"error"/, cp2.text);
    assert.equal((await sh("late", "rm /root/f && sync")).code, 0);
    const listed = await srv.api("GET", "/v1/units/late/checkpoints", { token });
    const after = (listed.body as { id: string; comment?: string }[]).find((c) => c.comment === "after");
    assert.ok(after, listed.text);
    const restore = await srv.api("POST", `/v1/units/late/checkpoints/${after.id}/restore`, { token });
    assert.equal(restore.status, 200, restore.text);
    assert.doesNotMatch(restore.text, /"type":"error"/, restore.text);
    assert.equal((await sh("late", "cat /root/f")).out, "kept\n");
  });
});
