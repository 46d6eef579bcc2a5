// Issue #16 part 6 against real units, through the HTTP API: wakes at an organization's running
// limit that may wait (`wait_for_capacity`) are served first come, first served; a slot freed by a
// delete goes at once to the longest waiter (not to whichever retry lands first); a wake that does
// not wait is refused while others wait; a waiter whose client goes away leaves the queue and
// takes no slot.
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import type { LocalNode } from "../node/local/local-node.js";
import { execHttp } from "../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("waiting for a running slot (issue #16: first come, first served)", () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    s = await startSqliteServer();
    token = await s.token("one-slot", { limits: { runningLimit: 1, warmLimit: 5 } });
  });
  after(() => s?.close());
  const api = (method: string, path: string, json?: unknown) =>
    s.api(method, path, { token, ...(json !== undefined && { json }), timeoutMs: 120_000 });
  const create = async (name: string, wait: boolean) => {
    const r = await api("POST", "/v1/units", { name, wait_for_capacity: wait });
    assert.equal(r.status, 201, r.text);
  };
  const status = async (name: string) => (await api("GET", `/v1/units/${name}`)).body.status as string;
  const waiting = () => (s.server.node as LocalNode).lifecycle.capacity.waiting;
  /** Holds the organization's one slot with a command that runs until the unit is deleted. */
  const occupy = async (name: string) => {
    const held = execHttp(s.url, token, name, ["sleep", "120"]);
    const deadline = Date.now() + 60_000;
    while ((await status(name)) !== "running") {
      assert.ok(Date.now() < deadline, `${name} never ran`);
      await sleep(100);
    }
    return { held };
  };

  it("serves the waiters in the order they arrived when a delete frees the slot", async () => {
    await create("busy", false);
    for (const name of ["first", "second", "third"]) await create(name, true);
    await create("impatient", false);
    const { held } = await occupy("busy");

    // The three arrive half a second apart (a refused wake used to retry every second on its own
    // clock: the slot went to whichever retry came first after it freed, not to the first).
    const done: string[] = [];
    const waits = ["first", "second", "third"].map(async (name, i) => {
      await sleep(i * 450);
      const r = await execHttp(s.url, token, name, ["sh", "-c", "sleep 0.5; echo ran"]);
      assert.equal(r.status, 200, `${name}: ${r.body.toString()}`);
      assert.equal(r.stdout.toString(), "ran\n");
      done.push(name);
    });
    await sleep(1200);
    assert.equal(waiting(), 3, "three wakes wait");
    // A wake that does not wait is refused while others wait, even for a slot about to be free.
    const refused = await execHttp(s.url, token, "impatient", ["true"]);
    assert.equal(refused.status, 409, refused.body.toString());
    const err = JSON.parse(refused.body.toString());
    assert.equal(err.code, "UMS_RUNNING_LIMIT");
    assert.match(err.error, /3 earlier wakes waiting for a running slot/);

    // The delete frees the slot (no hold is released): the first waiter gets it at once.
    const freed = Date.now();
    assert.equal((await api("DELETE", "/v1/units/busy")).status, 204);
    await held.catch(() => undefined);
    await Promise.all(waits);
    assert.deepEqual(done, ["first", "second", "third"]);
    assert.ok(Date.now() - freed < 15_000, "each took the slot as soon as the one before went idle");
    assert.equal(waiting(), 0);
    assert.equal(await status("impatient"), "cold");
  });

  it("a waiter whose client goes away leaves the queue and takes no slot", async () => {
    await create("holder", false);
    await create("gone", true);
    await create("stays", true);
    const { held } = await occupy("holder");

    // `gone` waits, then its client closes the connection.
    const req = request(`${s.url}/v1/units/gone/exec?cmd=true`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      agent: false,
    });
    req.on("error", () => {});
    req.end();
    const deadline = Date.now() + 30_000;
    while (waiting() !== 1) {
      assert.ok(Date.now() < deadline, "the wake of gone never queued");
      await sleep(50);
    }
    const stays = execHttp(s.url, token, "stays", ["echo", "mine"]);
    while (waiting() !== 2) {
      assert.ok(Date.now() < deadline, "the wake of stays never queued");
      await sleep(50);
    }
    req.destroy();
    while (waiting() !== 1) {
      assert.ok(Date.now() < deadline, "the wake of gone stayed in the queue after its client left");
      await sleep(50);
    }

    assert.equal((await api("DELETE", "/v1/units/holder")).status, 204);
    await held.catch(() => undefined);
    const r = await stays;
    assert.equal(r.status, 200, r.body.toString());
    assert.equal(r.stdout.toString(), "mine\n");
    await sleep(1500);
    assert.equal(await status("gone"), "cold", "the wake whose client left never booted its unit");
    assert.equal(waiting(), 0);
  });
});
