import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { events, nodeHttp, tools } from "./helpers.js";

const sqlite = testDialects[0];

/** Spec 2.7, 3.2, 4.6, 6.4 against real units (services live in the unit: one dialect is enough). */
describe("services", () => {
  let s: TestServer;
  let token: string;
  let t: ReturnType<typeof tools>;

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    token = await s.token("svc");
    t = tools(s, token);
    for (const name of ["box", "web"]) await s.api("POST", "/v1/units", { token, json: { name } });
  });
  after(() => s?.close());

  it("rejects bad definitions naming the field: cmd, unknown need, cycle; a second http_port is 409", async () => {
    const noCmd = await t.put("box", "a", { args: [] });
    assert.equal(noCmd.status, 400, noCmd.text);
    assert.ok(
      noCmd.body.errors.some((e: string) => e.includes("cmd")),
      noCmd.text,
    );
    const unknown = await t.put("box", "a", { cmd: "sleep", args: ["100"], needs: ["ghost"] });
    assert.equal(unknown.status, 400);
    assert.ok(
      unknown.body.errors.some((e: string) => /needs: unknown service 'ghost'/.test(e)),
      unknown.text,
    );
    assert.equal((await t.put("box", "a", { cmd: "sleep", args: ["100"], needs: [] })).status, 200);
    assert.equal((await t.put("box", "b", { cmd: "sleep", args: ["100"], needs: ["a"] })).status, 200);
    const cycle = await t.put("box", "a", { cmd: "sleep", args: ["100"], needs: ["b"] });
    assert.equal(cycle.status, 400);
    assert.match(cycle.body.errors.join(), /needs: would form a cycle/);
    const badName = await t.put("box", ".x", { cmd: "sleep" });
    assert.equal(badName.status, 400);
    assert.equal((await t.put("box", "p1", { cmd: "sleep", args: ["100"], http_port: 7001 })).status, 200);
    const dup = await t.put("box", "p2", { cmd: "sleep", args: ["100"], http_port: 7001 });
    assert.equal(dup.status, 409, dup.text);
    assert.equal(dup.body.code, "UMS_SERVICE_PORT_TAKEN");
    // Nothing half-applied: the rejected ones do not exist, `a` kept its definition.
    assert.equal((await s.api("GET", "/v1/units/box/services/p2", { token })).status, 404);
    assert.deepEqual((await t.get("box", "a")).needs, []);
    const needed = await s.api("DELETE", "/v1/units/box/services/a", { token });
    assert.equal(needed.status, 409, needed.text);
    for (const n of ["b", "a", "p1"])
      assert.equal((await s.api("DELETE", `/v1/units/box/services/${n}`, { token })).status, 204);
    assert.deepEqual((await s.api("GET", "/v1/units/box/services", { token })).body, []);
  });

  it("starts in needs order: a service waits for the http_port it needs to listen", async () => {
    // `api` listens only after 1.5 s; `client` needs it and fetches from it once at start.
    assert.equal(
      (await t.put("web", "api", { ...nodeHttp(9000, "from-api", 1500), needs: [], http_port: 9000 })).status,
      200,
    );
    const r = await t.put(
      "web",
      "client",
      { cmd: "sh", args: ["-c", "curl -s http://127.0.0.1:9000/x; echo; exec sleep 1000"], needs: ["api"] },
      "3",
    );
    assert.equal(r.status, 200);
    assert.match(r.headers.get("content-type") ?? "", /application\/x-ndjson/);
    const ev = events(r.text);
    assert.ok(
      ev.some((e) => e.type === "started"),
      r.text,
    );
    assert.ok(
      ev.some((e) => e.type === "stdout" && e.data === "from-api/x"),
      r.text,
    );
    assert.equal(ev.at(-1)?.type, "complete");
    assert.equal(ev.at(-1)?.log_files?.combined, "/.unit/logs/services/client.log");
    for (const e of ev) assert.ok(Number.isInteger(e.timestamp) && e.timestamp > 1.7e12, JSON.stringify(e));
    const log = await t.sh("web", "cat /.unit/logs/services/client.log; cat /.unit/logs/services/client.stdout.log");
    assert.match(log.out, /^\d{4}-\d\d-\d\dT[\d:.]+Z \[stdout\] from-api\/x$/m);
  });

  it("proxies the unit's HTTP traffic to the http_port service", async () => {
    await t.until("web", "api", (b) => b.state.status === "running");
    const r = await s.api("GET", "/v1/units/web/hello", { token });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, "from-api/hello");
  });
});
