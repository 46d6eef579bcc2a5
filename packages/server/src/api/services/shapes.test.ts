import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { events, tools } from "../../testing/services.js";

const sqlite = testDialects[0];

/**
 * Spec 4.6 and 4.7: a PUT's answer on both prefixes (the ServiceResponse, or the NDJSON start the
 * public Sprites clients read), their start/stop/signal shapes, and a DELETE that answers only once
 * the service's processes are gone, on the external and the internal API.
 */
describe("services: shapes on both prefixes, and DELETE", () => {
  let s: TestServer;
  let token: string;
  let t: ReturnType<typeof tools>;
  /** Live (not zombie) `sleep` processes whose command line holds `marker`, as root sees them in the unit. */
  const alive = async (marker: string) => Number((await t.sh("box", sleeping(marker), "root")).out.trim());

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    token = await s.token("shapes");
    t = tools(s, token);
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "box" } })).status, 201);
  });
  after(() => s?.close());

  it("PUT answers the ServiceResponse under /v1/units, NDJSON when asked and under /v1/sprites", async () => {
    const json = await s.api("PUT", "/v1/units/box/services/a", {
      token,
      json: { cmd: "sleep", args: ["4201"], needs: [] },
    });
    assert.equal(json.status, 200, json.text);
    assert.match(json.headers.get("content-type") ?? "", /^application\/json/);
    assert.deepEqual(
      { ...json.body, state: undefined },
      { name: "a", cmd: "sleep", args: ["4201"], needs: [], http_port: null, state: undefined },
    );
    assert.equal(json.body.state.name, "a");
    assert.equal(json.body.state.status, "starting");

    const asked = await s.api("PUT", "/v1/units/box/services/a?duration=1", {
      token,
      json: { cmd: "sh", args: ["-c", "echo units-stream; exec sleep 4201"], needs: [] },
      headers: { accept: "application/x-ndjson" },
    });
    assert.equal(asked.status, 200);
    assert.match(asked.headers.get("content-type") ?? "", /^application\/x-ndjson/);
    const ev = events(asked.text);
    assert.ok(
      ev.some((e) => e.type === "stdout" && e.data === "units-stream"),
      asked.text,
    );
    assert.equal(ev.at(-1)?.type, "complete");

    // The JS client: no Accept, `httpPort` as in its types, args and needs left out (the Go client).
    const sprites = await s.api("PUT", "/v1/sprites/box/services/b?duration=1s", {
      token,
      json: { cmd: "sh", args: ["-c", "echo sprites-stream; exec sleep 4202"], httpPort: 9301 },
    });
    assert.equal(sprites.status, 200, sprites.text);
    assert.match(sprites.headers.get("content-type") ?? "", /^application\/x-ndjson/);
    assert.ok(
      events(sprites.text).some((e) => e.type === "stdout" && e.data === "sprites-stream"),
      sprites.text,
    );
    assert.equal((await t.get("box", "b")).http_port, 9301);
    const onlyJson = await s.api("PUT", "/v1/sprites/box/services/b", {
      token,
      json: { cmd: "sleep", args: ["4202"] },
      headers: { accept: "application/json" },
    });
    assert.equal(onlyJson.body.name, "b");
    assert.equal(onlyJson.body.http_port, null);

    // Bad input is a 400 naming the field on both prefixes, and nothing is half-applied.
    const noCmd = await s.api("PUT", "/v1/units/box/services/c", { token, json: { args: [] } });
    assert.equal(noCmd.status, 400);
    assert.match(noCmd.text, /cmd/);
    const badPort = await s.api("PUT", "/v1/sprites/box/services/c", { token, json: { cmd: "x", httpPort: "80" } });
    assert.equal(badPort.status, 400, badPort.text);
    assert.match(badPort.text, /http_port/);
    assert.equal((await s.api("GET", "/v1/sprites/box/services/c", { token })).status, 404);
  });

  it("start, stop (with the clients' `timeout`) and signal answer in the clients' shapes", async () => {
    assert.equal(
      (await t.put("box", "stubborn", { cmd: "sh", args: ["-c", "trap '' TERM; sleep 4203 & wait"] })).status,
      200,
    );
    // Running once spawned; the shell ignores SIGTERM once its sleep has started.
    await waitFor(async () => (await alive("sleep 4203")) === 1);
    const t0 = Date.now();
    const stop = await s.api("POST", "/v1/sprites/box/services/stubborn/stop?timeout=1s", { token });
    const took = Date.now() - t0;
    assert.equal(stop.status, 200, stop.text);
    assert.match(stop.headers.get("content-type") ?? "", /^application\/x-ndjson/);
    assert.equal(events(stop.text).find((e) => e.type === "stopped")?.exit_code, 137, stop.text);
    assert.ok(took >= 900 && took < 8000, `stop took ${took} ms`);
    assert.equal(await alive("sleep 4203"), 0);
    for (const bad of ["soon", "5m"]) {
      const r = await s.api("POST", `/v1/units/box/services/stubborn/stop?timeout=${bad}`, { token });
      assert.equal(r.status, 400, r.text);
      assert.match(r.text, /timeout/);
    }
    const start = await s.api("POST", "/v1/sprites/box/services/stubborn/start?duration=500ms", { token });
    assert.equal(start.status, 200);
    assert.ok(events(start.text).some((e) => e.type === "started"));
    const running = await t.until("box", "stubborn", (b) => b.state.status === "running");

    const sig = { name: "a", signal: "HUP" };
    const before = await t.until("box", "a", (b) => b.state.status === "running");
    const units = await s.api("POST", "/v1/units/box/services/signal", { token, json: sig });
    assert.equal(units.status, 200, units.text);
    assert.equal(units.body.signal, "HUP");
    // HUP ends its `sleep`: running again means restarted (another pid), not the state of before the
    // signal took effect (a signal sent then found it between its end and its restart: 409).
    await t.until("box", "a", (b) => b.state.status === "running" && b.state.pid !== before.state.pid);
    const sprites = await s.api("POST", "/v1/sprites/box/services/signal", { token, json: sig });
    assert.equal(sprites.status, 204, sprites.text);
    assert.equal(sprites.text, "");
    const ghost = await s.api("POST", "/v1/sprites/box/services/signal", {
      token,
      json: { name: "zz", signal: "HUP" },
    });
    assert.equal(ghost.status, 404);
    assert.equal((await t.get("box", "stubborn")).state.pid, running.state.pid);
  });

  it("DELETE answers once the process, its group and its setsid children are gone (external API)", async () => {
    // Ignores SIGTERM (and so do its children): only the SIGKILL after the grace ends it.
    const script = "trap '' TERM; setsid sleep 4211 & sleep 4212 & wait";
    assert.equal((await t.put("box", "deaf", { cmd: "sh", args: ["-c", script] })).status, 200);
    await t.until("box", "deaf", (b) => b.state.status === "running");
    await waitFor(async () => (await alive("sleep 421")) === 2);
    const t0 = Date.now();
    const del = await s.api("DELETE", "/v1/units/box/services/deaf", { token });
    const took = Date.now() - t0;
    assert.equal(del.status, 204, del.text);
    assert.ok(took >= 9000 && took < 14_000, `DELETE took ${took} ms (grace 10 s)`);
    assert.equal(await alive("sleep 421"), 0);
    assert.equal((await s.api("GET", "/v1/units/box/services/deaf", { token })).status, 404);

    assert.equal(
      (await t.put("box", "soft", { cmd: "sh", args: ["-c", "setsid sleep 4213 & exec sleep 4214"] })).status,
      200,
    );
    await waitFor(async () => (await alive("sleep 421")) === 2);
    const t1 = Date.now();
    assert.equal((await s.api("DELETE", "/v1/sprites/box/services/soft", { token })).status, 204);
    assert.ok(Date.now() - t1 < 5000);
    assert.equal(await alive("sleep 421"), 0);
  });

  it("DELETE on the internal API (spec 4.7) answers once the processes are gone", async () => {
    // Double quotes inside: the body travels in a single-quoted shell word.
    const body = JSON.stringify({ cmd: "sh", args: ["-c", 'trap "" TERM; setsid sleep 4221 & sleep 4222 & wait'] });
    const curl = "curl -sS --unix-socket /.unit/api.sock";
    const put = await t.sh("box", `${curl} -X PUT -d '${body}' 'http://unit/v1/services/inner?duration=0'`);
    assert.equal(JSON.parse(put.out).state.status, "starting", put.out + put.err);
    await waitFor(async () => (await alive("sleep 422")) === 2);
    // In one shell: the DELETE, then at once the processes that are left.
    const t0 = Date.now();
    const r = await t.sh(
      "box",
      `${curl} -o /dev/null -w '%{http_code}\\n' -X DELETE http://unit/v1/services/inner; ${sleeping("sleep 422")}`,
    );
    assert.deepEqual(r.out.trim().split("\n"), ["204", "0"], r.out + r.err);
    const took = Date.now() - t0;
    assert.ok(took >= 9000 && took < 14_000, `DELETE took ${took} ms (grace 10 s)`);
  });
});

/** A shell line that prints how many live `sleep` processes have `marker` in their command line. */
function sleeping(marker: string): string {
  return `ps -eo stat=,comm=,args= | awk '$1 !~ /^Z/ && $2 == "sleep"' | grep -c '${marker}' || true`;
}

async function waitFor(pred: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail("condition not met in time");
}
