// Issue #19 finding 8: unit root can stop (SIGSTOP, ptrace) its own agent; an exec then hung for
// over 120 s with no error. Every wait of the host on a unit's agent is bounded now (connect, then
// the first answer: default 5 s + 10 s); a call that times out answers 504 UMS_AGENT_TIMEOUT, the
// unit's check says unhealthy, and the next request restarts the unit instead of hanging again.
// Against a real server and a real unit whose agent the unit's root stops.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../testing/exec-client.js";
import { startWithUnit, type TestServer } from "../testing/server.js";
import { upgradeAnswer } from "../testing/ws-upgrade.js";

/** The server's default bound on one call to a stuck agent (connect 5 s + answer 10 s), and slack. */
const BOUND_MS = 15_000 + 5000;

/** `p`, or a failure once it has taken a minute: the test must fail, not hang, if the API does. */
function within<T>(what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} hung for over 60 s`)), 60_000);
  });
  return Promise.race([p, hung]).finally(() => clearTimeout(timer));
}

/**
 * Run as unit root: stops the unit's agent a second after the exec that asks for it has returned
 * (the exec's own output goes through the agent). The agent is the one node process whose command
 * line is exactly this (PID 1, catatonit, names it among its arguments; fs workers add a flag).
 */
const STOP_AGENT = [
  "pid=$(pgrep -f '^/\\.unit/bin/node /\\.unit/agent/agent\\.cjs$')",
  'test "$(echo "$pid" | wc -w)" = 1 || { echo "agent pid: [$pid]" >&2; exit 3; }',
  'setsid sh -c "sleep 1; kill -STOP $pid" </dev/null >/dev/null 2>&1 &',
  'echo "$pid"',
].join("\n");

describe("a stuck agent does not hang the API (issue #19 finding 8)", () => {
  let s: TestServer;
  let token: string;
  const unit = "stuck";
  const run = (cmd: string[], user?: "root") => execHttp(s.url, token, unit, cmd, user ? { user } : {});

  /** Stops the unit's agent from inside (as unit root) and waits until it has surely stopped. */
  async function stopAgent(): Promise<void> {
    const r = await run(["sh", "-c", STOP_AGENT], "root");
    assert.equal(r.exitCode, 0, r.stderr.toString());
    assert.match(r.stdout.toString(), /^\d+\n$/);
    await new Promise((r) => setTimeout(r, 2000));
  }

  /** Runs `call`, which must fail with the agent timeout within the bound; returns how long it took. */
  async function timesOut(what: string, call: () => Promise<{ status: number; body: string }>): Promise<number> {
    const start = performance.now();
    const res = await call();
    const ms = performance.now() - start;
    assert.equal(res.status, 504, `${what}: ${res.status} ${res.body}`);
    assert.match(res.body, /UMS_AGENT_TIMEOUT/, what);
    assert.match(res.body, /did not answer within .*marked unhealthy.*restarts it/, what);
    assert.ok(ms < BOUND_MS, `${what} took ${Math.round(ms)} ms`);
    return ms;
  }

  const bounded = (url: string, init: RequestInit = {}) =>
    fetch(url, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...init.headers },
      signal: AbortSignal.timeout(60_000), // the test must fail, not hang, if the API does
    }).then(async (r) => ({ status: r.status, body: await r.text() }));

  /** A websocket exec whose upgrade must be refused: its status and body. */
  const wsExec = () => upgradeAnswer(`${s.url.replace("http", "ws")}/v1/units/${unit}/exec?cmd=true`, token, 60_000);

  before(async () => {
    ({ s, token } = await startWithUnit("stuck-agent", unit));
    assert.equal((await run(["true"])).exitCode, 0);
  });
  after(async () => {
    // A call that hung (the failure this test looks for) must not keep the server from closing.
    s?.server.app.server.closeAllConnections();
    await s?.close();
  });

  it("an exec against a stopped agent fails with 504 in time; the unit is unhealthy; the next exec restarts it", async () => {
    await stopAgent();
    const ms = await timesOut("exec", async () => {
      const r = await within("an exec", run(["echo", "hi"]));
      return { status: r.status, body: r.body.toString() };
    });
    const check = await s.api("GET", `/v1/units/${unit}/check`, { token });
    assert.equal(check.status, 200);
    assert.equal(check.body.status, "unhealthy", JSON.stringify(check.body));
    assert.match(check.body.reason, /agent/);
    const again = await run(["echo", "after the restart"]);
    assert.equal(again.status, 200, again.body.toString());
    assert.equal(again.stdout.toString(), "after the restart\n");
    assert.equal((await s.api("GET", `/v1/units/${unit}/check`, { token })).body.status, "healthy");
    process.stdout.write(`# exec against a stopped agent failed after ${Math.round(ms)} ms\n`);
  });

  it("every other wait on the agent is bounded too: websocket exec, sessions, fs, services, proxy", async () => {
    await stopAgent();
    const base = `${s.url}/v1/units/${unit}`;
    const results = await Promise.all([
      timesOut("websocket exec", () => within("a websocket exec", wsExec())),
      timesOut("session list", () => bounded(`${base}/exec`)),
      timesOut("fs list", () => bounded(`${base}/fs/list?path=/&workingDir=/`)),
      timesOut("services list", () => bounded(`${base}/services`)),
      timesOut("proxy (the agent is asked for the unit's http_port)", () => bounded(`${base}/some/page`)),
    ]);
    assert.equal(results.length, 5);
    assert.equal((await s.api("GET", `/v1/units/${unit}/check`, { token })).body.status, "unhealthy");
    const again = await run(["echo", "back"]);
    assert.equal(again.stdout.toString(), "back\n", again.body.toString());
  });
});
