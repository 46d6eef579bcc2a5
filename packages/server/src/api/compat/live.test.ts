// Issue #12 against real units: the checkpoint list's filters (`history`, `includeAuto`, the ones the
// Sprites clients send) on both prefixes, and `wait_for_capacity`: a wake at the organization's
// running limit waits for a slot instead of answering 409.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

interface Info {
  id: string;
  source_id?: string;
  is_auto: boolean;
}

describe("the Sprites clients' calls on real units", () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    s = await startSqliteServer();
    token = await s.token("live");
  });
  after(() => s?.close());
  const api = (method: string, path: string, json?: unknown, t = token) =>
    s.api(method, path, { token: t, ...(json !== undefined && { json }), timeoutMs: 120_000 });
  const ids = (list: Info[]) => list.map((c) => c.id);

  it("lists checkpoints with the history and includeAuto filters; the backup before a restore is automatic", async () => {
    await s.unit(token, "cps");
    for (const comment of ["first", "second"]) {
      const r = await api("POST", "/v1/units/cps/checkpoint", { comment });
      assert.match(r.text, /"type":"complete"/);
    }
    const restore = await api("POST", "/v1/units/cps/checkpoints/v0/restore");
    assert.match(restore.text, /"backup_id":"v2"/);

    const all: Info[] = (await api("GET", "/v1/units/cps/checkpoints")).body;
    assert.deepEqual(ids(all), ["v0", "v1", "v2"], "spec 4.2: every checkpoint under /v1/units");
    assert.deepEqual(
      all.map((c) => c.is_auto),
      [false, false, true],
    );
    assert.deepEqual(ids((await api("GET", "/v1/sprites/cps/checkpoints")).body), ["v0", "v1"]);
    assert.deepEqual(ids((await api("GET", "/v1/sprites/cps/checkpoints?includeAuto=true")).body), ids(all));
    assert.deepEqual(ids((await api("GET", "/v1/units/cps/checkpoints?includeAuto=false")).body), ["v0", "v1"]);

    // history: the checkpoint and those it descends from.
    const byId = new Map(all.map((c) => [c.id, c]));
    for (const id of ["v0", "v1", "v2"]) {
      const chain: string[] = [];
      for (let c = byId.get(id); c; c = c.source_id ? byId.get(c.source_id) : undefined) chain.push(c.id);
      const got = ids((await api("GET", `/v1/units/cps/checkpoints?history=${id}`)).body);
      assert.deepEqual(got, chain.sort(), `history=${id}`);
    }
    assert.ok((byId.get("v2")?.source_id ?? "") !== "", "the backup descends from the checkpoint the unit was on");

    const bad = await api("GET", "/v1/sprites/cps/checkpoints?history=latest");
    assert.equal(bad.status, 400);
    assert.match(bad.body.errors[0], /^history: /);
    assert.equal((await api("GET", "/v1/sprites/cps/checkpoints?includeAuto=maybe")).status, 400);
    assert.equal((await api("GET", "/v1/sprites/cps/checkpoints?history=v9")).status, 404);
  });

  it("wait_for_capacity: a wake at the running limit waits for a slot; without it, 409 at once", async () => {
    const limited = await s.token("one-slot", { limits: { runningLimit: 1 } });
    for (const [name, wait] of [
      ["busy", false],
      ["waits", true],
      ["refused", false],
    ] as const) {
      const r = await api("POST", "/v1/sprites", { name, wait_for_capacity: wait }, limited);
      assert.equal(r.status, 201, r.text);
    }
    // `busy` holds the one running slot for as long as its command runs.
    const busy = execHttp(s.url, limited, "busy", ["sh", "-c", "sleep 4"]).then((r) => ({ r, at: Date.now() }));
    // Wait until it runs (its status says so) before asking for the others.
    const deadline = Date.now() + 60_000;
    while ((await api("GET", "/v1/units/busy", undefined, limited)).body.status !== "running") {
      assert.ok(Date.now() < deadline, "busy never ran");
      await new Promise((r) => setTimeout(r, 100));
    }
    const refused = await execHttp(s.url, limited, "refused", ["true"]);
    assert.equal(refused.status, 409, refused.body.toString());
    assert.match(refused.body.toString(), /UMS_RUNNING_LIMIT/);

    const waited = await execHttp(s.url, limited, "waits", ["echo", "in"]);
    const done = Date.now();
    const first = await busy;
    assert.equal(first.r.exitCode, 0);
    assert.equal(waited.status, 200, waited.body.toString());
    assert.equal(waited.stdout.toString(), "in\n");
    assert.ok(done >= first.at, "the waiting wake got its slot only once busy was released");
  });
});
