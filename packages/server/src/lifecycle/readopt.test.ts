import assert from "node:assert/strict";
import { type ChildProcess, execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../testing/exec-client.js";
import { freePort } from "../testing/free-port.js";
import { removeServerHostResources, testServeEnv } from "../testing/host-cleanup.js";
import { lockSubnet } from "../testing/runtime.js";
import { isRunning, spawnServe, UMS_BIN } from "../testing/serve-process.js";

/** DESIGN.md section 3: `ums serve` restarting or crashing does not stop running units. */
describe("a running unit survives kill -9 of ums serve", () => {
  let dataDir: string;
  let port: number;
  let env: NodeJS.ProcessEnv;
  let server: ChildProcess | undefined;
  let token: string;
  let unlock: () => Promise<void>;

  const serve = () => spawnServe(`http://127.0.0.1:${port}`, env);

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "ums-readopt-"));
    port = await freePort();
    const subnet = await lockSubnet();
    unlock = subnet.unlock;
    env = {
      ...(await testServeEnv(subnet.n)),
      PATH: process.env.PATH,
      UMS_DATA_DIR: dataDir,
      UMS_LISTEN: `127.0.0.1:${port}`,
      UMS_LOG_LEVEL: "warn",
    };
    token = execFileSync(UMS_BIN, ["token", "create", "--org", "readopt"], { env }).toString().trim();
    server = await serve();
  });

  after(async () => {
    if (isRunning(server)) {
      // Clean up through the API so every host resource of the unit goes.
      await fetch(`http://127.0.0.1:${port}/v1/units/keeper`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${token}` },
      }).catch(() => {});
      server.kill("SIGTERM");
      await new Promise((r) => server?.once("exit", r));
    }
    await removeServerHostResources(dataDir);
    await unlock?.();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("keeps the unit and its processes running and re-adopts them on restart", async () => {
    const base = `http://127.0.0.1:${port}`;
    const created = await fetch(`${base}/v1/units`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "keeper" }),
    });
    assert.equal(created.status, 201);
    const unitId = ((await created.json()) as { id: string }).id;
    const bg = await execHttp(base, token, "keeper", [
      "sh",
      "-c",
      "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo $!",
    ]);
    const sleeper = bg.stdout.toString().trim();
    assert.match(sleeper, /^\d+$/);
    const task = await execHttp(base, token, "keeper", [
      "curl",
      "-sf",
      "--unix-socket",
      "/.unit/api.sock",
      "-X",
      "POST",
      "-H",
      "content-type: application/json",
      "-d",
      '{"name":"keep","expire":"1h"}',
      "http://unit/v1/tasks",
    ]);
    assert.equal(task.exitCode, 0, task.stderr.toString());

    server?.kill("SIGKILL");
    await new Promise((r) => server?.once("exit", r));
    const state = JSON.parse(execFileSync("runc", ["--root", join(dataDir, "runc"), "state", unitId]).toString());
    assert.equal(state.status, "running", "the container outlived the server");

    server = await serve();
    const unit = (await (
      await fetch(`${base}/v1/units/keeper`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { status: string };
    assert.equal(unit.status, "running");
    const check = await execHttp(base, token, "keeper", ["sh", "-c", `kill -0 ${sleeper} && echo alive`]);
    assert.equal(check.stdout.toString(), "alive\n", "processes started before the crash still run");
    const tasks = await execHttp(base, token, "keeper", [
      "curl",
      "-sf",
      "--unix-socket",
      "/.unit/api.sock",
      "http://unit/v1/tasks",
    ]);
    const held = JSON.parse(tasks.stdout.toString()) as { name: string }[];
    assert.deepEqual(
      held.map((t) => t.name),
      ["keep"],
      "the keep-awake task is held again by the new server",
    );
  });
});
