import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { execHttp } from "../../testing/exec-client.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

const sqlite = testDialects[0];

function events(text: string): { type: string; data?: string; error?: string; time: string }[] {
  return text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
}

/** Spec 4.2, 2.6, 3.3, 6.1 and the fork of our own. */
describe("checkpoints", () => {
  let s: TestServer;
  let token: string;
  const sh = (unit: string, script: string) => execHttp(s.url, token, unit, ["sh", "-c", script]);
  const checkpoint = async (unit: string, comment?: string) => {
    const r = await s.api("POST", `/v1/units/${unit}/checkpoint`, {
      token,
      json: comment === undefined ? {} : { comment },
    });
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get("content-type") ?? "", /application\/x-ndjson/);
    const ev = events(r.text);
    assert.equal(ev.at(-1)?.type, "complete", `checkpoint of ${unit} failed: ${JSON.stringify(ev.at(-1))}`);
    const done = ev.at(-1) as { data?: string; id?: string } | undefined;
    const id = /checkpoint (v\d+) created/.exec(done?.data ?? "")?.[1] ?? "";
    assert.equal(done?.id, id, "complete names the new checkpoint in `id` too");
    return id;
  };

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    token = await s.token("cps");
    for (const name of ["box", "other"]) await s.api("POST", "/v1/units", { token, json: { name } });
  });
  after(() => s?.close());

  it("numbers checkpoints v0, v1, … and chains source_id", async () => {
    assert.equal((await sh("box", "echo one > /home/unit/f")).exitCode, 0);
    assert.equal(await checkpoint("box", "first"), "v0");
    assert.equal(await checkpoint("box"), "v1");
    const list = (await s.api("GET", "/v1/units/box/checkpoints", { token })).body;
    assert.deepEqual(
      list.map((c: { id: string; source_id?: string; comment: string; active: boolean; health: string }) => [
        c.id,
        c.source_id ?? null,
        c.comment,
        c.active,
        c.health,
      ]),
      [
        ["v0", null, "first", false, ""],
        ["v1", "v0", "", true, ""],
      ],
    );
    const one = await s.api("GET", "/v1/units/box/checkpoints/v0", { token });
    assert.equal(one.body.id, "v0");
    assert.ok(Date.parse(one.body.create_time) > 0);
    assert.equal((await s.api("GET", "/v1/units/box/checkpoints/v9", { token })).body.code, "UMS_CHECKPOINT_NOT_FOUND");
  });

  it("restores files and policies, saving the current state first", async () => {
    await s.api("POST", "/v1/units/box/policy/resources", { token, json: { memory: { limit_mb: 300 } } });
    const before = await checkpoint("box", "with limits");
    await sh("box", "echo two > /home/unit/f; echo new > /home/unit/g");
    await s.api("DELETE", "/v1/units/box/policy/resources", { token });
    const r = await s.api("POST", `/v1/units/box/checkpoints/${before}/restore`, { token });
    assert.equal(r.status, 200);
    const ev = events(r.text);
    assert.equal(ev.at(-1)?.type, "complete", `restore failed: ${JSON.stringify(ev.at(-1))}`);
    const backup = /saved as (v\d+)/.exec(ev.at(-1)?.data ?? "")?.[1];
    assert.ok(backup);
    assert.deepEqual(
      [(ev.at(-1) as { id?: string }).id, (ev.at(-1) as { backup_id?: string }).backup_id],
      [before, backup],
    );
    assert.equal(
      (await sh("box", "cat /home/unit/f; test -e /home/unit/g || echo no-g")).stdout.toString(),
      "one\nno-g\n",
    );
    assert.deepEqual((await s.api("GET", "/v1/units/box/policy/resources", { token })).body.memory, { limit_mb: 300 });
    assert.equal(
      (await s.api("GET", "/v1/units/box", { token })).body.status,
      "running",
      "the unit boots after a restore",
    );
    // The automatic backup holds the changed files.
    const back = await s.api("POST", `/v1/units/box/checkpoints/${backup}/restore`, { token });
    assert.equal(events(back.text).at(-1)?.type, "complete");
    assert.equal((await sh("box", "cat /home/unit/f /home/unit/g")).stdout.toString(), "two\nnew\n");
  });

  it("takes a consistent snapshot of a unit that is writing", async () => {
    // A writer rewrites a file atomically (write + rename) in a loop while checkpoints are taken.
    await sh(
      "box",
      "setsid sh -c 'i=0; while [ $i -lt 4000 ]; do i=$((i+1)); seq 1 2000 > /home/unit/w.tmp; mv /home/unit/w.tmp /home/unit/w; done' >/dev/null 2>&1 < /dev/null &",
    );
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await checkpoint("box", `during writes ${i}`));
    await sh("box", "pkill -f 'seq 1 2000' ; pkill -f 'while \\[' ; true");
    for (const id of ids) {
      await s.api("POST", "/v1/units/other/checkpoint", { token, json: {} });
      const fork = `fork-${id}`;
      const created = await s.api("POST", "/v1/units", {
        token,
        json: { name: fork, from: { unit: "box", checkpoint: id } },
      });
      assert.equal(created.status, 201, created.text);
      const r = await sh(fork, "test -e /home/unit/w && (wc -l < /home/unit/w; tail -1 /home/unit/w) || echo missing");
      assert.ok(
        ["2000\n2000\n", "missing\n"].includes(r.stdout.toString()),
        `${id}: ${JSON.stringify(r.stdout.toString())}`,
      );
      await s.api("DELETE", `/v1/units/${fork}`, { token });
    }
  });

  it("refuses to delete the active checkpoint and deletes others", async () => {
    const list = (await s.api("GET", "/v1/units/box/checkpoints", { token })).body as { id: string; active: boolean }[];
    const active = list.find((c) => c.active);
    assert.ok(active);
    const refused = await s.api("DELETE", `/v1/units/box/checkpoints/${active.id}`, { token });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.code, "UMS_CHECKPOINT_ACTIVE");
    assert.match(refused.body.error, /active checkpoint cannot be deleted/);
    const other = list.find((c) => !c.active);
    assert.ok(other);
    assert.equal((await s.api("DELETE", `/v1/units/box/checkpoints/${other.id}`, { token })).status, 204);
    assert.equal((await s.api("GET", `/v1/units/box/checkpoints/${other.id}`, { token })).status, 404);
    const again = await checkpoint("box");
    assert.ok(Number(again.slice(1)) > Number(list.at(-1)?.id.slice(1)), "ids are never reused");
  });

  it("cannot restore one unit's checkpoint onto another", async () => {
    const list = (await s.api("GET", "/v1/units/box/checkpoints", { token })).body as { id: string }[];
    const high = list.at(-1)?.id;
    const r = await s.api("POST", `/v1/units/other/checkpoints/${high}/restore`, { token });
    assert.equal(r.status, 404);
    assert.match(r.body.error, /belongs to the unit it was taken of/);
  });

  it("forks a unit from another unit's checkpoint, files and policies included", async () => {
    await sh("box", "echo forked-content > /home/unit/forkme");
    await s.api("POST", "/v1/units/box/policy/resources", { token, json: { pids: { limit: 333 } } });
    const id = await checkpoint("box", "to fork");
    const created = await s.api("POST", "/v1/units", {
      token,
      json: { name: "twin", from: { unit: "box", checkpoint: id } },
    });
    assert.equal(created.status, 201);
    assert.equal((await sh("twin", "cat /home/unit/forkme; hostname")).stdout.toString(), "forked-content\ntwin\n");
    assert.equal((await s.api("GET", "/v1/units/twin/policy/resources", { token })).body.pids.limit, 333);
    await sh("twin", "echo changed > /home/unit/forkme");
    assert.equal(
      (await sh("box", "cat /home/unit/forkme")).stdout.toString(),
      "forked-content\n",
      "the source is untouched",
    );
    const bad = await s.api("POST", "/v1/units", {
      token,
      json: { name: "twin2", from: { unit: "box", checkpoint: "v999" } },
    });
    assert.equal(bad.status, 404);
    assert.equal((await s.api("GET", "/v1/units/twin2", { token })).status, 404, "nothing half-created");
    const otherOrg = await s.token("stranger");
    const stolen = await s.api("POST", "/v1/units", {
      token: otherOrg,
      json: { name: "thief", from: { unit: "box", checkpoint: id } },
    });
    assert.equal(stolen.status, 404, "another organization's units cannot be forked");
  });

  it("serves the internal API on /.unit/api.sock to processes in the unit, without a token", async () => {
    const api = (args: string) => sh("inside", `curl -s --unix-socket /.unit/api.sock ${args}`);
    await s.api("POST", "/v1/units", { token, json: { name: "inside" } });
    await sh("inside", "echo before > /home/unit/state");
    const made = (await api('-X POST -d \'{"comment":"from inside"}\' http://unit/v1/checkpoint')).stdout.toString();
    const lines = made
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.equal(lines[0].status, "starting");
    assert.ok(lines.some((l) => l.status === "progress" && typeof l.percent === "number"));
    assert.deepEqual(lines.at(-1), { status: "complete", id: "v0" });
    const list = JSON.parse((await api("http://unit/v1/checkpoints")).stdout.toString());
    assert.deepEqual(
      list.map((c: { id: string; comment: string; active: boolean }) => [c.id, c.comment, c.active]),
      [["v0", "from inside", true]],
    );
    assert.equal(JSON.parse((await api("http://unit/v1/checkpoints/v0")).stdout.toString()).id, "v0");
    const refused = await api("-o /dev/null -w '%{http_code}' -X DELETE http://unit/v1/checkpoints/v0");
    assert.equal(refused.stdout.toString(), "409");
    assert.equal((await api("-o /dev/null -w '%{http_code}' http://unit/v1/services/x")).stdout.toString(), "404");
    await sh("inside", "echo after > /home/unit/state");
    const accepted = await api("-o /dev/null -w '%{http_code}' -X POST http://unit/v1/checkpoints/v0/restore");
    assert.equal(accepted.stdout.toString(), "202");
    // The restore runs after the answer; the unit restarts with the checkpoint's files.
    for (let i = 0; i < 100; i++) {
      const cps = (await s.api("GET", "/v1/units/inside/checkpoints", { token })).body as {
        id: string;
        active: boolean;
      }[];
      if (cps.length === 2 && cps.find((c) => c.active)?.id === "v0") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal((await sh("inside", "cat /home/unit/state")).stdout.toString(), "before\n");
  });

  it("shows the five most recent checkpoints read-only at /.unit/checkpoints, kept current", async () => {
    await s.api("POST", "/v1/units", { token, json: { name: "viewer" } });
    await sh("viewer", "echo zero > /home/unit/n");
    for (let i = 0; i < 7; i++) {
      await sh("viewer", `echo ${i} > /home/unit/n`);
      await checkpoint("viewer");
    }
    const ls = await sh("viewer", "ls /.unit/checkpoints | sort -V | tr '\\n' ' '");
    assert.equal(ls.stdout.toString(), "v2 v3 v4 v5 v6 ");
    assert.equal((await sh("viewer", "cat /.unit/checkpoints/v4/home/unit/n")).stdout.toString(), "4\n");
    const write = await sh(
      "viewer",
      "sudo touch /.unit/checkpoints/v4/home/unit/x 2>/dev/null && echo wrote; echo end",
    );
    assert.equal(write.stdout.toString(), "end\n", "read-only, even for root");
    assert.equal((await s.api("DELETE", "/v1/units/viewer/checkpoints/v4", { token })).status, 204);
    const after = await sh("viewer", "ls /.unit/checkpoints | sort -V | tr '\\n' ' '");
    assert.equal(after.stdout.toString(), "v1 v2 v3 v5 v6 ");
  });
});
