// Issue #19 finding 6: any token holder crashed `ums serve` with one request (an empty `cmd`, an
// attach to a session that does not exist): the agent answered the websocket upgrade with an HTTP
// error, the server's agent client aborted the half-open websocket, whose 'error' had no listener.
// Each trigger goes to a real `ums serve` process; afterwards it must still run, answer, exec, and
// its log must show no fault caught by the last-resort handler (faults.ts): that handler keeps the
// process alive, so only the log tells a handled error from a crash that was merely survived.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, it } from "node:test";
import WebSocket from "ws";
import { execHttp } from "../testing/exec-client.js";
import { freePort } from "../testing/free-port.js";
import { cleanupStoppedServer, testServeEnv } from "../testing/host-cleanup.js";
import { lockSubnet } from "../testing/runtime.js";
import { isRunning, spawnServe, UMS_BIN } from "../testing/serve-process.js";

/** The status an upgrade was answered with (101 when it opened), and the body of a refusal. */
function upgrade(url: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    ws.once("open", () => {
      ws.close();
      resolve({ status: 101, body: "" });
    });
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on("error", (err) => {
      if (ws.readyState !== ws.OPEN) reject(err);
    });
  });
}

describe("no request crashes ums serve (issue #19 finding 6)", () => {
  let dataDir: string;
  let base: string;
  let token: string;
  let server: ChildProcess | undefined;
  let unlock: (() => Promise<void>) | undefined;
  let log = "";
  let env: NodeJS.ProcessEnv;

  /** Starts `ums serve` (again, when a trigger killed it: each trigger is judged on its own). */
  async function serve(): Promise<void> {
    log = "";
    server = await spawnServe(base, env);
    server.stderr?.on("data", (d) => {
      log += d;
    });
  }

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "ums-crash-req-"));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const subnet = await lockSubnet();
    unlock = subnet.unlock;
    env = {
      ...(await testServeEnv(subnet.n)),
      PATH: process.env.PATH,
      UMS_DATA_DIR: dataDir,
      UMS_LISTEN: `127.0.0.1:${port}`,
      UMS_IDLE_WARM: "10m",
      UMS_LOG_LEVEL: "warn",
    };
    token = execFileSync(UMS_BIN, ["token", "create", "--org", "crash-req"], { env }).toString().trim();
    await serve();
    const created = await fetch(`${base}/v1/units`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "victim" }),
    });
    assert.equal(created.status, 201);
    assert.equal((await execHttp(base, token, "victim", ["true"])).exitCode, 0);
  });

  beforeEach(async () => {
    const answers = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (answers && isRunning(server)) return;
    if (isRunning(server)) {
      const exited = new Promise((r) => server?.once("exit", r));
      server.kill("SIGKILL");
      await exited;
    }
    await serve();
  });

  after(async () => {
    if (isRunning(server)) {
      const exited = new Promise((r) => server?.once("exit", r));
      server.kill("SIGTERM");
      await exited;
    }
    await cleanupStoppedServer(dataDir);
    await rm(dataDir, { recursive: true, force: true });
    await unlock?.();
  });

  /** The server still runs, answers, and runs a command; nothing reached the last-resort handler. */
  async function assertServing(after: string): Promise<void> {
    await new Promise((r) => setTimeout(r, 200)); // a crash is asynchronous: give it its chance
    assert.ok(isRunning(server), `ums serve exited after ${after}: ${log}`);
    assert.equal((await fetch(`${base}/healthz`)).status, 200, `healthz after ${after}`);
    const r = await execHttp(base, token, "victim", ["echo", "still here"]);
    assert.equal(r.stdout.toString(), "still here\n", `exec after ${after}`);
    assert.doesNotMatch(log, /last-resort/, `a fault reached the last-resort handler after ${after}`);
  }

  it("an HTTP exec with an empty cmd answers 400 saying what to fix", async () => {
    const res = await fetch(`${base}/v1/units/victim/exec?cmd=`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    const body = (await res.json()) as { errors?: string[]; code?: string };
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(body.code, "UMS_VALIDATION");
    assert.match(body.errors?.join("; ") ?? "", /cmd.*(empty|program|command)/i);
    await assertServing("POST exec?cmd=");
  });

  it("a websocket exec with an empty cmd is refused with 400", async () => {
    const ws = `${base.replace("http", "ws")}/v1/units/victim/exec?cmd=&cmd=x`;
    const r = await upgrade(ws, token);
    assert.equal(r.status, 400, r.body);
    assert.match(r.body, /cmd/);
    await assertServing("a websocket exec with cmd=");
  });

  it("attaching to an exec session that does not exist answers 404", async () => {
    const r = await upgrade(`${base.replace("http", "ws")}/v1/units/victim/exec/987654`, token);
    assert.equal(r.status, 404, r.body);
    assert.match(r.body, /UMS_SESSION_NOT_FOUND/);
    await assertServing("an attach to session 987654");
  });

  it("a burst of every trigger at once leaves it serving", async () => {
    const ws = base.replace("http", "ws");
    const triggers = Array.from({ length: 8 }, (_, i) => [
      fetch(`${base}/v1/units/victim/exec?cmd=`, { method: "POST", headers: { authorization: `Bearer ${token}` } }),
      upgrade(`${ws}/v1/units/victim/exec?cmd=`, token),
      upgrade(`${ws}/v1/units/victim/exec/${900_000 + i}`, token),
    ]).flat();
    const results = await Promise.allSettled(triggers);
    for (const r of results) assert.equal(r.status, "fulfilled", String((r as PromiseRejectedResult).reason));
    await assertServing("a burst of triggers");
  });
});
