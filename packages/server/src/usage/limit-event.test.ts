// Issue #17: a unit that reaches its memory limit becomes a `limit.reached` event (kind memory) of
// its organization, through the usage sampler (memory.failcnt grew) and the event log, as
// `ums serve` wires them (start.ts); another organization does not see it.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("limit.reached from the usage sampler", { timeout: 180_000 }, () => {
  let s: TestServer;
  let token: string;
  let other: string;
  before(async () => {
    s = await startSqliteServer({ usageIntervalMs: 1000 });
    token = await s.token("limit-a");
    other = await s.token("limit-b");
  });
  after(() => s?.close());

  it("a unit that fills its memory limit is a limit.reached event of kind memory", async () => {
    const made = await s.api("POST", "/v1/units", { token, json: { name: "small", config: { ram_mb: 64 } } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    // Booted, and sampled once (the sampler reports a limit when memory.failcnt grows between two
    // of its samples).
    await execHttp(s.url, token, "small", ["true"]);
    for (let i = 0; i < 40; i++) {
      const m = await s.api("GET", "/v1/units/small/metrics?window=1h", { token });
      if (m.status === 200 && JSON.stringify(m.body).includes("memory_bytes")) break;
      await sleep(250);
    }
    await sleep(1500);
    // Python asks for 256 MiB in a 64 MiB unit: the cgroup refuses pages (failcnt) and the kernel
    // kills it; the command's own exit code does not matter.
    await execHttp(s.url, token, "small", ["sh", "-c", "python3 -c \"b = b'x' * (256 * 1024 * 1024)\" || true"]);
    type Ev = { type: string; unit: string; data: { kind?: string } };
    let events: Ev[] = [];
    for (let i = 0; i < 60; i++) {
      const r = await s.api("GET", "/v1/events?type=limit.reached", { token });
      assert.equal(r.status, 200);
      events = (r.body as { events: Ev[] }).events;
      if (events.some((e) => e.unit === "small" && e.data.kind === "memory")) break;
      await sleep(500);
    }
    const usage = await s.api("GET", "/v1/units/small/metrics?window=1h", { token });
    assert.ok(
      events.some((e) => e.unit === "small" && e.data.kind === "memory"),
      `no limit.reached of kind memory: ${JSON.stringify(events)}; usage: ${JSON.stringify(usage.body).slice(-600)}`,
    );
    const theirs = await s.api("GET", "/v1/events?type=limit.reached", { token: other });
    assert.deepEqual((theirs.body as { events: Ev[] }).events, []);
  });
});
