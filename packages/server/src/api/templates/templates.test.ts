// Issue #18 part 4: organization templates against a real server with real units: publish a unit's
// checkpoint (a service, files, policies), start three units from it, each runs the service and is
// isolated from the others; the source unit and the template can be deleted with every unit made
// from it still working; another organization can neither see nor use it; bad input is refused
// with nothing made.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { run } from "../../runtime/exec/host-command.js";
import { testImage } from "../../runtime/image/test-image.js";
import { isReadonly, listQgroups, quotaMode, subvolumeId } from "../../runtime/storage/btrfs.js";
import { assertMadeOnItsNodeAlone } from "../../testing/made-on-node.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";
import { tools } from "../../testing/services.js";

const MiB = 1024 * 1024;

describe("templates", { timeout: 300_000 }, () => {
  let s: TestServer;
  let token: string;
  let other: string;
  let t: ReturnType<typeof tools>;
  let templatesDir: string;
  let templateId: string;
  const SERVICE = { cmd: "sh", args: ["-c", "echo started >> /tmp/web.log; exec sleep 100000"] };
  const NETWORK = { rules: [{ action: "allow", domain: "example.com" }] };

  /** The template subvolumes in the pool (the pool is shared: only the ids this test made are compared). */
  const onDisk = async () => new Set(await readdir(templatesDir).catch(() => [] as string[]));
  const templateNames = async (tok = token) =>
    ((await s.api("GET", "/v1/templates", { token: tok })).body.templates as { name: string }[]).map((x) => x.name);
  const cat = async (unit: string, path: string) => {
    const r = await t.sh(unit, `cat ${path}`);
    assert.equal(r.code, 0, `${unit}: cat ${path}: ${r.err}`);
    return r.out.trim();
  };

  before(async () => {
    templatesDir = join((await testImage()).pool.path, "templates");
    s = await startSqliteServer({ idleWarm: "10m" });
    token = await s.token("tpl");
    other = await s.token("tpl-other");
    t = tools(s, token);
    await s.unit(token, "src");
    const w = await t.sh("src", "echo from-template > /home/unit/data && head -c 64M /dev/urandom > /home/unit/blob");
    assert.equal(w.code, 0, w.err);
    const res = await s.api("POST", "/v1/units/src/policy/resources", { token, json: { memory: { limit_mb: 300 } } });
    assert.equal(res.status, 200, res.text);
    const net = await s.api("POST", "/v1/units/src/policy/network", { token, json: NETWORK });
    assert.ok(net.status < 300, net.text);
    assert.equal((await t.put("src", "web", SERVICE)).status, 200);
    await t.until("src", "web", (b) => b.state.status === "running");
    const cp = await s.api("POST", "/v1/units/src/checkpoint", { token, json: { comment: "for the template" } });
    assert.match(cp.text, /"type":"complete"/);
  });
  after(() => s?.close());

  it("publishes a checkpoint as a read-only subvolume of its own", async () => {
    const r = await s.api("POST", "/v1/templates", {
      token,
      json: { name: "base", description: "a unit with a web service", from: { unit: "src", checkpoint: "v0" } },
    });
    assert.equal(r.status, 201, r.text);
    assert.match(r.body.id, /^tpl-/);
    templateId = r.body.id;
    assert.deepEqual(
      [r.body.name, r.body.description, r.body.organization, r.body.source],
      ["base", "a unit with a web service", "tpl", { unit: "src", checkpoint: "v0" }],
    );
    assert.ok((await onDisk()).has(templateId), "templates/<id> exists in the pool");
    assert.ok(await isReadonly(join(templatesDir, templateId)), "the template's subvolume is read-only");
    assert.deepEqual(await templateNames(), ["base"]);
    const one = await s.api("GET", "/v1/templates/base", { token });
    assert.equal(one.status, 200);
    assert.deepEqual(one.body, r.body);
  });

  it("names the node that made it, and units made from it go to that node alone (issue #15)", () =>
    assertMadeOnItsNodeAlone(s, token, "tpl", { template: "base" }));

  it("starts three units from it, each with the service running, the files and the policies", async () => {
    const made = await Promise.all(
      ["t1", "t2", "t3"].map((name) => s.api("POST", "/v1/units", { token, json: { name, template: "base" } })),
    );
    for (const r of made) assert.equal(r.status, 201, r.text);
    for (const name of ["t1", "t2", "t3"]) {
      assert.equal(await cat(name, "/home/unit/data"), "from-template");
      const svc = await t.until(name, "web", (b) => b.state.status === "running");
      assert.ok(Number(svc.state.pid) > 0, `${name}: the service has a process`);
      assert.equal((await t.sh(name, "pgrep -x sleep >/dev/null")).code, 0, `${name}: the service's process runs`);
      const res = await s.api("GET", `/v1/units/${name}/policy/resources`, { token });
      assert.equal(res.body.memory?.limit_mb, 300, `${name}: the template's resources`);
      const net = await s.api("GET", `/v1/units/${name}/policy/network`, { token });
      assert.deepEqual(net.body.rules, NETWORK.rules, `${name}: the template's network policy`);
    }
  });

  it("charges a unit from it only what it writes; no quota group holds the template", async (ctx) => {
    const pool = join(templatesDir, "..");
    if ((await quotaMode(pool)) !== "squota") return ctx.skip("the pool has no simple quotas (kernel before 6.7)");
    const charged = async (unitId: string) => {
      await run("btrfs", ["filesystem", "sync", pool]);
      const group = (await readFile(join(pool, "units", unitId, "qgroup"), "utf8")).trim();
      const found = (await listQgroups(pool)).find((g) => g.id === group);
      assert.ok(found, `quota group ${group}`);
      return found.referenced;
    };
    const t2 = (await s.api("GET", "/v1/units/t2", { token })).body.id as string;
    const before = await charged(t2);
    assert.ok(before < 32 * MiB, `the template's 64 MiB are not charged to a unit made from it: ${before}`);
    assert.equal((await t.sh("t2", "head -c 16M /dev/urandom > /home/unit/mine && sync")).code, 0);
    const after = await charged(t2);
    assert.ok(after - before >= 15 * MiB && after - before < 24 * MiB, `what it writes is: ${before} -> ${after}`);
    const member = `0/${await subvolumeId(join(templatesDir, templateId))}`;
    const holders = (await listQgroups(pool)).filter((g) => g.children.includes(member)).map((g) => g.id);
    assert.deepEqual(holders, [], "no quota group holds the template");
  });

  it("isolates the units: a write in one is seen in no other", async () => {
    assert.equal((await t.sh("t1", "echo changed > /home/unit/data; touch /home/unit/only-t1")).code, 0);
    assert.equal(await cat("t1", "/home/unit/data"), "changed");
    for (const name of ["t2", "t3", "src"]) {
      assert.equal(await cat(name, "/home/unit/data"), "from-template", `${name} keeps its own files`);
      assert.notEqual((await t.sh(name, "test -e /home/unit/only-t1")).code, 0, `${name} has no file of t1`);
    }
  });

  it("outlives its source unit, and its units outlive it", async () => {
    // A unit made from it but never booted: its disk must stand alone once the template is gone.
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "t4", template: "base" } })).status, 201);
    assert.equal((await s.api("DELETE", "/v1/units/src", { token })).status, 204);
    assert.equal((await s.api("GET", "/v1/templates/base", { token })).status, 200, "the source's deletion leaves it");
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "t5", template: "base" } })).status, 201);
    assert.equal(await cat("t5", "/home/unit/data"), "from-template");

    const del = await s.api("DELETE", "/v1/templates/base", { token });
    assert.equal(del.status, 204, del.text);
    assert.ok(!(await onDisk()).has(templateId), "its subvolume is gone");
    assert.equal((await s.api("GET", "/v1/templates/base", { token })).body.code, "UMS_TEMPLATE_NOT_FOUND");
    assert.deepEqual(await templateNames(), []);
    for (const name of ["t2", "t3", "t4", "t5"]) {
      assert.equal(await cat(name, "/home/unit/data"), "from-template", `${name} works after the template's deletion`);
    }
    assert.equal(await cat("t1", "/home/unit/data"), "changed");
    await t.until("t4", "web", (b) => b.state.status === "running");
    const again = await s.api("POST", "/v1/units", { token, json: { name: "t6", template: "base" } });
    assert.equal(again.status, 404);
    assert.equal(again.body.code, "UMS_TEMPLATE_NOT_FOUND");
    assert.equal((await s.api("GET", "/v1/units/t6", { token })).status, 404, "no unit was made");
    assert.equal((await s.api("DELETE", "/v1/templates/base", { token })).status, 404);
  });

  it("is its organization's alone: another one gets 404 for every use", async () => {
    await s.unit(token, "src2");
    await s.api("POST", "/v1/units/src2/checkpoint", { token, json: {} });
    const r = await s.api("POST", "/v1/templates", {
      token,
      json: { name: "mine", from: { unit: "src2", checkpoint: "v0" } },
    });
    assert.equal(r.status, 201, r.text);
    assert.deepEqual(await templateNames(other), []);
    const get = await s.api("GET", "/v1/templates/mine", { token: other });
    assert.deepEqual([get.status, get.body.code], [404, "UMS_TEMPLATE_NOT_FOUND"]);
    const use = await s.api("POST", "/v1/units", { token: other, json: { name: "thief", template: "mine" } });
    assert.deepEqual([use.status, use.body.code], [404, "UMS_TEMPLATE_NOT_FOUND"]);
    assert.equal((await s.api("GET", "/v1/units/thief", { token: other })).status, 404);
    const del = await s.api("DELETE", "/v1/templates/mine", { token: other });
    assert.deepEqual([del.status, del.body.code], [404, "UMS_TEMPLATE_NOT_FOUND"]);
    // Publishing another organization's unit: its unit is not found, as any unit of another organization.
    const steal = await s.api("POST", "/v1/templates", {
      token: other,
      json: { name: "stolen", from: { unit: "src2", checkpoint: "v0" } },
    });
    assert.deepEqual([steal.status, steal.body.code], [404, "UMS_UNIT_NOT_FOUND"]);
    // Names are per organization: the other one may have its own 'mine'.
    await s.unit(other, "theirs");
    await s.api("POST", "/v1/units/theirs/checkpoint", { token: other, json: {} });
    const own = await s.api("POST", "/v1/templates", {
      token: other,
      json: { name: "mine", from: { unit: "theirs", checkpoint: "v0" } },
    });
    assert.equal(own.status, 201, own.text);
    assert.notEqual(own.body.id, r.body.id);
    assert.equal((await s.api("GET", "/v1/templates/mine", { token })).body.id, r.body.id, "each sees its own");
  });

  it("refuses bad input with 400 (or 404/409) and makes nothing", async () => {
    const before = await onDisk();
    const names = await templateNames();
    const post = (json: unknown) => s.api("POST", "/v1/templates", { token, json });
    const from = { unit: "src2", checkpoint: "v0" };
    const cases: [unknown, number, string][] = [
      [{ name: "Bad_Name", from }, 400, "UMS_VALIDATION"],
      [{ name: "", from }, 400, "UMS_VALIDATION"],
      [{ name: "x".repeat(55), from }, 400, "UMS_VALIDATION"],
      [{ name: "ok" }, 400, "UMS_VALIDATION"],
      [{ name: "ok", from: { unit: "src2" } }, 400, "UMS_VALIDATION"],
      [{ name: "ok", from, extra: 1 }, 400, "UMS_VALIDATION"],
      [{ name: "ok", from, description: "d".repeat(1001) }, 400, "UMS_VALIDATION"],
      [{ name: "ok", from: { unit: "ghost", checkpoint: "v0" } }, 404, "UMS_UNIT_NOT_FOUND"],
      [{ name: "ok", from: { unit: "src2", checkpoint: "v9" } }, 404, "UMS_CHECKPOINT_NOT_FOUND"],
      [{ name: "ok", from: { unit: "src2", checkpoint: "../../x" } }, 404, "UMS_CHECKPOINT_NOT_FOUND"],
      [{ name: "mine", from }, 409, "UMS_TEMPLATE_EXISTS"],
    ];
    for (const [json, status, code] of cases) {
      const r = await post(json);
      assert.deepEqual([r.status, r.body.code], [status, code], `${JSON.stringify(json)}: ${r.text}`);
      if (status === 400) assert.ok(r.body.errors?.[0], "a 400 says what is wrong");
    }
    const bad = await s.api("POST", "/v1/templates", {
      token,
      body: "{",
      headers: { "content-type": "application/json" },
    });
    assert.equal(bad.status, 400);
    const units: [unknown, number, string][] = [
      [{ name: "u1", template: "Not Valid" }, 400, "UMS_VALIDATION"],
      [{ name: "u1", template: "mine", from: { unit: "src2", checkpoint: "v0" } }, 400, "UMS_VALIDATION"],
      [{ name: "u1", template: "nope" }, 404, "UMS_TEMPLATE_NOT_FOUND"],
    ];
    for (const [json, status, code] of units) {
      const r = await s.api("POST", "/v1/units", { token, json });
      assert.deepEqual([r.status, r.body.code], [status, code], `${JSON.stringify(json)}: ${r.text}`);
      assert.equal((await s.api("GET", "/v1/units/u1", { token })).status, 404, "no unit was made");
    }
    const tooLong = await s.api("GET", `/v1/templates/${"a".repeat(300)}`, { token });
    assert.equal(tooLong.status, 400);
    assert.equal((await s.api("GET", "/v1/templates/NOT_A_NAME", { token })).status, 404);
    assert.deepEqual(await templateNames(), names, "no template was made");
    assert.deepEqual(
      [...(await onDisk())].filter((id) => !before.has(id)),
      [],
      "no subvolume was made",
    );
    assert.ok(!existsSync(join(templatesDir, "ok")));
  });
});
