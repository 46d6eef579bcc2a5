import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../testing/exec-client.js";
import { removeServerHostResources } from "../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../testing/serve-process.js";

/** docs/ARCHITECTURE.md section 8: `ums serve` restarting or crashing does not stop running units. */
describe("a running unit survives kill -9 of ums serve", () => {
  let serve: ServeProcess;

  before(async () => {
    serve = await prepareServe({ name: "readopt", org: "readopt" });
    await serve.start();
  });

  // Clean up through the API so every host resource of the unit goes.
  after(() => serve?.close(["keeper"], removeServerHostResources));

  it("keeps the unit and its processes running and re-adopts them on restart", async () => {
    const { base, token, dataDir } = serve;
    const created = await serve.api("POST", "/v1/units", { name: "keeper" });
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

    await serve.stop("SIGKILL");
    const state = JSON.parse(execFileSync("runc", ["--root", join(dataDir, "runc"), "state", unitId]).toString());
    assert.equal(state.status, "running", "the container outlived the server");

    await serve.start();
    const unit = (await (await serve.api("GET", "/v1/units/keeper")).json()) as { status: string };
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
