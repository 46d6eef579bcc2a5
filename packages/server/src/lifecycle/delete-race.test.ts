// A delete racing the requests of the same unit: whatever order they land in, nothing of the unit
// stays on the host once it is deleted (no disk in the pool, no container). Before the fix, a
// request that had read the unit before the delete booted it after: a fresh disk and a running
// container that no row pointed at, there for good (found as "test pool left mounted" in CI).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { UnitDeletedError } from "../lifecycle/errors.js";
import { testImage } from "../runtime/image/test-image.js";
import { execHttp } from "../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

describe("deleting a unit while requests for it are under way", { timeout: 240_000 }, () => {
  let s: TestServer;
  let token: string;
  let unitsDir: string;

  before(async () => {
    s = await startSqliteServer();
    token = await s.token("race");
    unitsDir = join((await testImage()).pool.path, "units");
  });
  after(() => s?.close());

  const leftovers = async (id: string) => {
    const left: string[] = [];
    if (existsSync(join(unitsDir, id))) left.push(`disk ${join(unitsDir, id)}`);
    if ((await s.server.runtime.running()).has(id)) left.push("a container");
    return left;
  };

  it("refuses to wake a unit from a record read before its delete (404), and makes nothing of it", async () => {
    const id = await s.unit(token, "stale");
    assert.equal((await execHttp(s.url, token, "stale", ["true"])).exitCode, 0);
    const org = await s.server.store.orgs.getBySlug("race");
    const stale = await s.server.store.units.getById(id);
    assert.ok(org && stale);
    assert.equal((await s.api("DELETE", "/v1/units/stale", { token })).status, 204);
    assert.deepEqual(await leftovers(id), []);

    // The request that read `stale` before the delete now asks for it: refused, nothing booted.
    await assert.rejects(s.server.node.hold(org, stale), UnitDeletedError);
    await assert.rejects(
      s.server.node.checkpoint(stale, "after delete", () => {}),
      UnitDeletedError,
    );
    assert.deepEqual(await leftovers(id), [], "the stale request made nothing of the deleted unit");
  });

  it("leaves nothing of the unit on the host when execs, a checkpoint and a fork race its delete", async () => {
    for (let round = 0; round < 4; round++) {
      const name = `r${round}`;
      const id = await s.unit(token, name);
      if (round % 2 === 1) await execHttp(s.url, token, name, ["true"]); // running when the race starts
      const fork = `${name}-fork`;
      const cp = await s.api("POST", `/v1/units/${name}/checkpoint`, { token, json: { comment: "race" } });
      const requests = [
        ...Array.from({ length: 6 }, () =>
          execHttp(s.url, token, name, ["true"]).then((r) => ({ status: r.status, text: r.stderr.toString() })),
        ),
        s.api("POST", `/v1/units/${name}/checkpoint`, { token, json: { comment: "racing" }, timeoutMs: 60_000 }),
        s.api("GET", `/v1/units/${name}/fs/read?path=/etc/hostname&workingDir=/`, { token, timeoutMs: 60_000 }),
        ...(cp.status === 200
          ? [
              s.api("POST", "/v1/units", {
                token,
                json: { name: fork, from: { unit: name, checkpoint: "v1" } },
                timeoutMs: 60_000,
              }),
            ]
          : []),
      ];
      await new Promise((r) => setTimeout(r, round * 40));
      const del = await s.api("DELETE", `/v1/units/${name}`, { token, timeoutMs: 60_000 });
      assert.equal(del.status, 204, del.text);
      const answers = await Promise.all(requests);
      for (const a of answers) assert.ok(a.status < 500, `no request failed on the server: ${a.status} ${a.text}`);
      assert.deepEqual(await leftovers(id), [], `round ${round}: the deleted unit left nothing`);
      assert.equal((await s.api("GET", `/v1/units/${name}`, { token })).status, 404);
      // The fork, if it was made, is a unit of its own: deleted, it leaves nothing either.
      const f = await s.api("GET", `/v1/units/${fork}`, { token });
      if (f.status === 200) {
        assert.equal((await s.api("DELETE", `/v1/units/${fork}`, { token })).status, 204);
        assert.deepEqual(await leftovers(f.body.id), []);
      }
    }
  });
});
