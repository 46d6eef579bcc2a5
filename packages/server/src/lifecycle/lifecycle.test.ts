import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { execHttp } from "../testing/exec-client.js";
import { startSqliteServer, startWithUnit, type TestServer } from "../testing/server.js";

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** docs/ARCHITECTURE.md section 5 with short timers: cold → running → warm → cold, limits, persistence. */
describe("unit lifecycle", () => {
  let s: TestServer;
  let token: string;
  const status = async (name: string) => (await s.api("GET", `/v1/units/${name}`, { token })).body;
  const waitStatus = (name: string, want: string, ms?: number) =>
    until(
      `${name} ${want}`,
      async () => {
        const u = await status(name);
        return u.status === want ? u : undefined;
      },
      ms,
    );

  before(async () => {
    // Warm units go cold after 5 s: a boot on a loaded host can take seconds, and a unit paused to
    // make room for it must still be warm when the test looks.
    s = await startSqliteServer({ idleWarm: "1s", idleCold: "5s", sweepMs: 100 });
    token = await s.token("life", { limits: { runningLimit: 1, warmLimit: 1 } });
    for (const name of ["a", "b", "c"]) await s.unit(token, name);
  });
  after(() => s?.close());

  it("boots on demand, pauses when idle, stops when warm long enough, and keeps its files", async () => {
    const first = await execHttp(s.url, token, "a", ["sh", "-c", "echo kept > /home/unit/file; sync"]);
    assert.equal(first.exitCode, 0);
    const running = await status("a");
    assert.equal(running.status, "running");
    assert.ok(running.last_running_at);
    assert.equal((await s.api("GET", "/v1/units/a/check", { token })).body.status, "healthy");

    const warm = await waitStatus("a", "warm", 5000);
    assert.ok(warm.last_warming_at);
    assert.equal((await s.api("GET", "/v1/units/a/check", { token })).body.status, "hibernated");
    const started = Date.now();
    const woke = await execHttp(s.url, token, "a", ["cat", "/home/unit/file"]);
    assert.equal(woke.stdout.toString(), "kept\n");
    assert.ok(Date.now() - started < 2000, "waking a warm unit is quick");

    await waitStatus("a", "cold", 15_000);
    const booted = await execHttp(s.url, token, "a", ["cat", "/home/unit/file"]);
    assert.equal(booted.stdout.toString(), "kept\n", "files survive cold → running");
    assert.equal((await status("a")).status, "running");
  });

  it("never freezes a unit that is still busy, even with nothing attached", async () => {
    await execHttp(s.url, token, "a", ["true"]);
    const ws = new WebSocket(
      `${s.url.replace("http", "ws")}/v1/units/a/exec?cmd=timeout&cmd=4&cmd=sh&cmd=-c&cmd=${encodeURIComponent("while :; do :; done")}&max_run_after_disconnect=30s`,
      { headers: { authorization: `Bearer ${token}` } },
    );
    await new Promise((r) => ws.once("message", r));
    ws.close();
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal((await status("a")).status, "running", "busy CPU keeps it running past idle-warm");
    await waitStatus("a", "warm", 10_000);
  });

  it("keeps the organization within running_limit and warm_limit", async () => {
    await execHttp(s.url, token, "a", ["true"]);
    assert.equal((await status("a")).status, "running");
    await execHttp(s.url, token, "b", ["true"]);
    assert.equal((await status("b")).status, "running");
    assert.equal((await status("a")).status, "warm", "the idle unit made room (running_limit 1)");
    await execHttp(s.url, token, "c", ["true"]);
    assert.equal((await status("c")).status, "running");
    assert.equal((await status("b")).status, "warm");
    assert.equal((await status("a")).status, "cold", "warm_limit 1: the oldest warm unit went cold");
    const org = (await s.api("GET", "/v1/organization", { token })).body.organization;
    assert.deepEqual(org.active_sprites, ["c"]);
    const list = (await s.api("GET", "/v1/units", { token })).body;
    assert.deepEqual([list.running, list.warm, list.cold], [1, 1, 1]);
  });

  it("refuses to wake a unit when every running unit is busy", async () => {
    const busy = execHttp(s.url, token, "c", ["sleep", "3"]);
    // c is held from before its wake until the command ends: running means held and busy.
    await waitStatus("c", "running", 5000);
    await new Promise((r) => setTimeout(r, 300));
    const r = await s.api("POST", "/v1/units/a/exec?cmd=true", { token });
    assert.equal(r.status, 409);
    assert.equal(r.body.code, "UMS_RUNNING_LIMIT");
    assert.match(r.body.error, /running_limit 1/);
    assert.equal((await busy).exitCode, 0);
  });

  it("applies privileges at the next boot", async () => {
    const set = await s.api("POST", "/v1/units/b/policy/privileges", { token, json: { no_new_privileges: true } });
    assert.equal(set.status, 200);
    await waitStatus("b", "cold", 15_000);
    const r = await execHttp(s.url, token, "b", [
      "sh",
      "-c",
      "sudo -n true 2>/dev/null && echo sudo-ok; grep NoNewPrivs /proc/self/status",
    ]);
    assert.match(r.stdout.toString(), /^NoNewPrivs:\s+1\n$/);
  });
});

describe("a unit whose agent dies", () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    ({ s, token } = await startWithUnit("crash", "fragile"));
  });
  after(() => s?.close());

  it("is reported unhealthy, then booted again by the next request", async () => {
    const boot = await execHttp(s.url, token, "fragile", ["sh", "-c", "echo keep > /home/unit/f"]);
    assert.equal(boot.exitCode, 0);
    assert.equal((await s.api("GET", "/v1/units/fragile/check", { token })).body.status, "healthy");
    // Root in the unit kills the agent; PID 1 (catatonit) follows it and the container ends.
    const killing = await execHttp(s.url, token, "fragile", [
      "sh",
      "-c",
      "sudo pkill -9 -f '^/.unit/bin/node /.unit/agent'",
    ]);
    // The exec's own answer is lost with its agent: an answer all the same, saying how it ended.
    assert.equal(killing.status, 200);
    assert.equal(killing.exitCode, 255);
    assert.match(
      killing.stderr.toString(),
      /^ums: the unit's agent closed the session before the process exited \(the connection (failed: .+|closed)\)\n$/,
    );
    const check = await until("unhealthy", async () => {
      const r = await s.api("GET", "/v1/units/fragile/check", { token });
      return r.body.status === "unhealthy" ? r.body : undefined;
    });
    assert.match(check.reason, /processes are gone/);
    const again = await execHttp(s.url, token, "fragile", ["cat", "/home/unit/f"]);
    assert.equal(again.stdout.toString(), "keep\n");
    assert.equal((await s.api("GET", "/v1/units/fragile/check", { token })).body.status, "healthy");
  });
});
