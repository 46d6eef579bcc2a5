import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { events, nodeHttp, tools } from "../../testing/services.js";

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

  it("reports a command that cannot start as an error event and a failed state", async () => {
    const r = await t.put("box", "nope", { cmd: "/no/such/binary", args: [], needs: [] }, "1");
    assert.equal(r.status, 200);
    const ev = events(r.text);
    assert.ok(!ev.some((e) => e.type === "started"), r.text);
    assert.match(ev.find((e) => e.type === "error")?.data ?? "", /could not be started: .*no\/such\/binary/, r.text);
    const failed = await t.until("box", "nope", (b) => b.state.status === "failed");
    assert.match(String(failed.state.error), /exited with code 127/);
    assert.equal((await s.api("DELETE", "/v1/units/box/services/nope", { token })).status, 204);
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

  it("restarts a killed service with backoff, counting restarts", async () => {
    assert.equal((await t.put("box", "crash", { cmd: "sleep", args: ["1000"], needs: [] })).status, 200);
    const first = await t.until("box", "crash", (b) => b.state.status === "running");
    const pid = first.state.pid as number;
    assert.ok(pid > 1);
    assert.equal(first.state.restart_count, 0);
    assert.equal((await t.sh("box", `kill -9 ${pid}`)).code, 0);
    const failed = await t.until("box", "crash", (b) => b.state.status === "failed");
    assert.ok(Date.parse(failed.state.next_restart_at as string) > Date.now() - 1000, JSON.stringify(failed));
    assert.match(String(failed.state.error), /exited with code 137/);
    const back = await t.until("box", "crash", (b) => b.state.status === "running" && b.state.pid !== pid);
    assert.equal(back.state.restart_count, 1);
    assert.equal(back.state.next_restart_at, undefined);
    // A signal through the API (spec 4.7) is a crash too.
    const sig = await s.api("POST", "/v1/units/box/services/signal", {
      token,
      json: { name: "crash", signal: "KILL" },
    });
    assert.equal(sig.status, 200, sig.text);
    assert.equal(sig.body.pid, back.state.pid);
    await t.until("box", "crash", (b) => b.state.restart_count === 2 && b.state.status === "running");
    const bad = await s.api("POST", "/v1/units/box/services/signal", {
      token,
      json: { name: "crash", signal: "NOPE" },
    });
    assert.equal(bad.status, 400);
  });

  it("keeps a stopped service stopped (sticky) until it is started again", async () => {
    const stop = await s.api("POST", "/v1/units/box/services/crash/stop", { token });
    assert.equal(stop.status, 200);
    const ev = events(stop.text);
    assert.deepEqual(
      ev.map((e) => e.type).filter((x) => x !== "exit"),
      ["stopping", "stopped", "complete"],
    );
    assert.equal(ev.find((e) => e.type === "stopped")?.exit_code, 143);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await t.get("box", "crash")).state.status, "stopped");
    assert.equal((await t.sh("box", "pgrep -x sleep || echo none")).out.trim(), "none");
    const start = await s.api("POST", "/v1/units/box/services/crash/start?duration=0", { token });
    assert.deepEqual(
      events(start.text).map((e) => e.type),
      ["started", "complete"],
    );
    assert.equal((await t.get("box", "crash")).state.status, "running");
  });

  it("streams a restart: stopping, stopped, started, output, complete", async () => {
    assert.equal(
      (await t.put("box", "talk", { cmd: "sh", args: ["-c", "echo hello $$; exec sleep 1000"], needs: [] })).status,
      200,
    );
    await t.until("box", "talk", (b) => b.state.status === "running");
    // "running" is the spawn; under load the old process's line can come after the restart's "stopping"
    // (a CI run saw it). Its line in the log means the agent has read it before the restart begins.
    const seen = await t.sh(
      "box",
      "for i in $(seq 100); do grep -q hello /.unit/logs/services/talk.log && exit 0; sleep 0.1; done; exit 1",
    );
    assert.equal(seen.code, 0, "the old process's line never reached its log");
    // The stream follows for `duration`: long enough for the new process's first line under load.
    const r = await s.api("POST", "/v1/units/box/services/talk/restart?duration=5s", { token });
    const types = events(r.text).map((e) => e.type);
    assert.deepEqual(
      types.filter((x) => x !== "exit"),
      ["stopping", "stopped", "started", "stdout", "complete"],
      r.text,
    );
  });

  it("serves logs: the last `lines`, then new lines while following for `duration`", async () => {
    const script = "i=0; while true; do i=$((i+1)); echo line $i; echo err $i >&2; sleep 0.2; done";
    assert.equal((await t.put("box", "ticker", { cmd: "sh", args: ["-c", script], needs: [] })).status, 200);
    await new Promise((r) => setTimeout(r, 1200));
    const two = events((await s.api("GET", "/v1/units/box/services/ticker/logs?lines=2", { token })).text);
    assert.equal(two.length, 3);
    assert.deepEqual(
      two
        .slice(0, 2)
        .map((e) => e.type)
        .sort(),
      ["stderr", "stdout"],
    );
    assert.equal(two[2]?.type, "complete");
    const t0 = Date.now();
    const follow = await s.api("GET", "/v1/units/box/services/ticker/logs?lines=0&duration=1", { token });
    const ev = events(follow.text);
    assert.ok(Date.now() - t0 >= 900);
    const lines = ev.filter((e) => e.type === "stdout");
    assert.ok(lines.length >= 3, follow.text);
    for (const e of lines) assert.ok(e.timestamp >= t0 - 50 && e.timestamp <= Date.now(), JSON.stringify(e));
    const files = await t.sh("box", "wc -l < /.unit/logs/services/ticker.stderr.log; ls /.unit/logs/services/");
    assert.ok(Number(files.out.split("\n")[0]) >= 5, files.out);
    assert.match(files.out, /ticker\.stdout\.log/);
  });

  it("starts services again when the unit boots again, except stopped ones", async () => {
    await s.api("POST", "/v1/units/box/services/ticker/stop", { token });
    const unit = await s.server.store.units.get((await s.server.store.orgs.getBySlug("svc"))?.id ?? "", "box");
    assert.ok(unit);
    const stoppedAt = Date.now();
    await s.server.runtime.stop(unit.id);
    assert.equal(await s.server.runtime.isAlive(unit.id), false);
    s.server.lifecycle.suspect(unit.id);
    const crash = await t.until("box", "crash", (b) => b.state.status === "running");
    assert.ok(Date.parse(crash.state.started_at as string) > stoppedAt, JSON.stringify(crash));
    assert.equal(crash.state.restart_count, 0);
    assert.equal((await t.get("box", "ticker")).state.status, "stopped");
  });
});
