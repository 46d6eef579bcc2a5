// Issue #5, crash safety: `kill -9` of `ums serve` at any step of a checkpoint, restore or
// checkpoint delete leaves the unit in the old or the new state after a restart, never in between,
// and no snapshot the database does not know (nor a row without its snapshot). A unit's delete
// (issue #20, found by the chaos test) is finished by the restart: never a unit listed without its disk.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FAILPOINTS, type Failpoint } from "../failpoints/failpoints.js";
import { testImage } from "../runtime/image/test-image.js";
import { execHttp } from "../testing/exec-client.js";
import { cleanupStoppedServer } from "../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../testing/serve-process.js";
import { within } from "../util/within.js";

/** What each failpoint interrupts, and what the unit holds before and after that operation. */
type Op = "checkpoint" | "restore" | "delete" | "unit-delete";
const opOf = (fp: Failpoint): Op => fp.split(".")[0] as Op;
/** The failpoints of these operations (templates have their own test, api/templates/template-crash.test.ts). */
const CASES = FAILPOINTS.filter((fp) =>
  ["checkpoint", "restore", "delete", "unit-delete"].includes(fp.split(".")[0] ?? ""),
);

describe("kill -9 of ums serve in the middle of checkpoint, restore and delete", () => {
  let poolDir: string;
  let server: ServeProcess;
  const ids = new Map<string, string>();

  const serve = (failpoint?: Failpoint) => server.start({ UMS_FAILPOINTS: failpoint ?? "" });
  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);

  async function sh(unit: string, script: string): Promise<string> {
    const r = await execHttp(server.base, server.token, unit, ["sh", "-c", script]);
    assert.equal(r.exitCode, 0, `'${script}' in ${unit}: ${r.stderr.toString()}`);
    return r.stdout.toString();
  }

  async function checkpoint(unit: string): Promise<string> {
    const text = await (await api("POST", `/v1/units/${unit}/checkpoint`, { comment: "setup" })).text();
    const done = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; data?: string })
      .find((e) => e.type === "complete");
    const id = /v\d+/.exec(done?.data ?? "")?.[0];
    assert.ok(id, `checkpoint of ${unit} did not complete: ${text}`);
    return id;
  }

  before(async () => {
    const image = await testImage();
    poolDir = image.pool.path;
    server = await prepareServe({ name: "crash", org: "crash", env: { UMS_IDLE_WARM: "10m" } });
    await serve();
    // One unit per failpoint: "old" saved as v0, then "new" written (delete cases: saved as v1).
    // Three at a time: thirteen boots at once outlasted an agent's start deadline on a loaded host,
    // and the setup is not what this suite tests.
    const inTurn = [...CASES.entries()];
    const worker = async () => {
      for (let next = inTurn.shift(); next; next = inTurn.shift()) await setUp(...next);
    };
    await Promise.all([worker(), worker(), worker()]);
    async function setUp(i: number, fp: Failpoint): Promise<void> {
      const name = `crash-${i}`;
      const r = await api("POST", "/v1/units", { name });
      assert.equal(r.status, 201);
      ids.set(name, ((await r.json()) as { id: string }).id);
      await sh(name, "echo old > /home/unit/state");
      assert.equal(await checkpoint(name), "v0");
      await sh(name, "echo new > /home/unit/state");
      if (opOf(fp) === "delete") assert.equal(await checkpoint(name), "v1");
    }
  });

  after(() => server?.close([...ids.keys()], (dataDir) => cleanupStoppedServer(dataDir)));

  let active: string | undefined;

  /** The database's checkpoints of a unit and the snapshots on disk are the same set. */
  async function assertConsistent(name: string): Promise<string[]> {
    const all = (await (await api("GET", `/v1/units/${name}/checkpoints`)).json()) as { id: string; active: boolean }[];
    const listed = all.map((c) => c.id).sort();
    active = all.find((c) => c.active)?.id;
    const dir = join(poolDir, "units", ids.get(name) ?? "?");
    const onDisk = (await readdir(join(dir, "checkpoints")).catch(() => [] as string[])).sort();
    assert.deepEqual(onDisk, listed, `${name}: snapshots on disk match the database`);
    for (const leftover of ["rootfs.old", "rootfs.new", "restore.json"]) {
      assert.ok(!existsSync(join(dir, leftover)), `${name}: no ${leftover} left after recovery`);
    }
    return listed;
  }

  async function assertRecovered(fp: Failpoint, name: string): Promise<void> {
    if (opOf(fp) === "unit-delete") {
      // The delete had begun (its tombstone was written): the restart finishes it.
      assert.equal((await api("GET", `/v1/units/${name}`)).status, 404, `${fp}: the unit is gone`);
      const list = (await (await api("GET", "/v1/units")).json()) as { sprites: { name: string }[] };
      assert.ok(!list.sprites.some((u) => u.name === name), `${fp}: the unit is not listed`);
      const dir = join(poolDir, "units", ids.get(name) ?? "?");
      assert.ok(!existsSync(dir), `${fp}: nothing of the unit is left on disk (${dir})`);
      // Its name is free again.
      assert.equal((await api("POST", "/v1/units", { name })).status, 201);
      ids.set(name, "");
      return;
    }
    const listed = await assertConsistent(name);
    const state = (await sh(name, "cat /home/unit/state")).trim();
    if (opOf(fp) === "checkpoint") {
      assert.equal(state, "new", `${fp}: a checkpoint never changes the files`);
      assert.ok(listed.includes("v0"));
      // Either the interrupted checkpoint exists whole (and holds the files) or not at all.
      if (listed.includes("v1"))
        assert.equal((await sh(name, "cat /.unit/checkpoints/v1/home/unit/state")).trim(), "new");
    } else if (opOf(fp) === "restore") {
      assert.ok(state === "old" || state === "new", `${fp}: the files are the old or the new ones, got '${state}'`);
      // Every restore failpoint comes after the automatic backup (v1): the unit is on the
      // checkpoint it was restored to, or on that backup if the restore did not happen.
      assert.equal(active, state === "old" ? "v0" : "v1", `${fp}: the active checkpoint matches the files`);
      if (state === "old") {
        // Restored: the backup taken first holds what the restore replaced.
        assert.ok(listed.includes("v1"), `${fp}: the automatic backup exists`);
        assert.equal((await sh(name, "cat /.unit/checkpoints/v1/home/unit/state")).trim(), "new");
      }
    } else {
      assert.equal(state, "new");
      assert.ok(listed.includes("v1"), "the active checkpoint is untouched");
    }
    // The unit works: it answers, and new checkpoints take the next id.
    const next = await checkpoint(name);
    assert.ok(!listed.includes(next), `${fp}: ${next} is a new id`);
    await assertConsistent(name);
  }

  it("recovers at every failpoint", async () => {
    for (const [i, fp] of CASES.entries()) {
      await server.stop("SIGTERM");
      const child = await serve(fp);
      const name = `crash-${i}`;
      const op = opOf(fp);
      // A checkpoint's failpoints include the freeze of a running unit: the unit runs (the org's
      // running limit may have paused it since its setup, the first of thirteen). Exec passes no failpoint.
      if (op === "checkpoint") await sh(name, "true");
      const died = new Promise<NodeJS.Signals | null>((r) => child.once("exit", (_code, signal) => r(signal)));
      const request =
        op === "checkpoint"
          ? api("POST", `/v1/units/${name}/checkpoint`, { comment: fp })
          : op === "restore"
            ? api("POST", `/v1/units/${name}/checkpoints/v0/restore`)
            : op === "delete"
              ? api("DELETE", `/v1/units/${name}/checkpoints/v0`)
              : api("DELETE", `/v1/units/${name}`);
      const response = request.then((r) => r.text()).catch((err: unknown) => `failed: ${String(err)}`);
      const signal = await within(died, 20_000, "alive" as const);
      assert.equal(signal, "SIGKILL", `${fp}: the server was killed at the failpoint (response: ${await response})`);
      await response;
      // A restart without the failpoint recovers; the unit is in the old or the new state.
      await serve();
      await assertRecovered(fp, name);
    }
  });
});
