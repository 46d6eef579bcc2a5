import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ENVIRONMENT_VERSION } from "@ums/protocol";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

for (const dialect of testDialects) {
  describe(`units API (${dialect.name})`, { skip: dialect.skip }, () => {
    let s: TestServer;
    let token: string;
    before(async () => {
      s = await startTestServer(dialect);
      token = await s.token("acme");
    });
    after(() => s?.close());

    const create = (name: string, extra: Record<string, unknown> = {}, t = token) =>
      s.api("POST", "/v1/units", { token: t, json: { name, ...extra } });

    it("creates a cold unit with the spec's fields", async () => {
      const r = await create("web-1");
      assert.equal(r.status, 201);
      const u = r.body;
      assert.match(u.id, /^unit-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.equal(u.name, "web-1");
      assert.equal(u.organization, "acme");
      assert.equal(u.status, "cold");
      assert.match(u.url, new RegExp(`^http://web-1-[a-z0-9]{8}\\.units\\.localhost:${s.server.port}$`));
      assert.deepEqual(u.url_settings, { auth: "unit" });
      assert.equal(u.environment_version, ENVIRONMENT_VERSION);
      assert.equal(u.version, ENVIRONMENT_VERSION);
      assert.equal(u.last_running_at, null);
      assert.equal(u.last_warming_at, null);
      assert.equal(u.labels, undefined, "labels are omitted when empty");
      assert.ok(!Number.isNaN(Date.parse(u.created_at)));
      assert.equal(u.created_at, u.updated_at);
    });

    it("gets a unit and answers 404 for one that does not exist", async () => {
      const created = (await create("get-me", { url_settings: { auth: "public" } })).body;
      const r = await s.api("GET", "/v1/units/get-me", { token });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, created);
      assert.deepEqual(r.body.url_settings, { auth: "public" });
      const missing = await s.api("GET", "/v1/units/nope", { token });
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { error: "unit 'nope' not found", code: "UMS_UNIT_NOT_FOUND" });
    });

    it("gives every unit its own URL", async () => {
      const a = (await create("url-a")).body;
      const b = (await create("url-b")).body;
      assert.notEqual(a.url, b.url);
      assert.equal(new URL(a.url).hostname.split(".")[0]?.length, "url-a".length + 9);
    });

    it("rejects a duplicate name with 409", async () => {
      assert.equal((await create("dup")).status, 201);
      const r = await create("dup");
      assert.equal(r.status, 409);
      assert.equal(r.body.code, "UMS_UNIT_EXISTS");
      assert.match(r.body.error, /'dup' already exists/);
    });

    it("updates url_settings (PUT replaces them) and bumps updated_at", async () => {
      const u = (await create("put-me")).body;
      await new Promise((r) => setTimeout(r, 5));
      const r = await s.api("PUT", "/v1/units/put-me", {
        token,
        json: { url_settings: { auth: "unit", private_access: "admins" } },
      });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.url_settings, { auth: "unit", private_access: "admins" });
      assert.ok(r.body.updated_at > u.updated_at);
      const r2 = await s.api("PUT", "/v1/units/put-me", { token, json: { url_settings: { auth: "public" } } });
      assert.deepEqual(r2.body.url_settings, { auth: "public" });
      const r3 = await s.api("PUT", "/v1/units/put-me", { token, json: { url_settings: {} } });
      assert.deepEqual(r3.body.url_settings, { auth: "unit" }, "auth defaults to unit");
      assert.deepEqual((await s.api("GET", "/v1/units/put-me", { token })).body.url_settings, { auth: "unit" });
    });

    it("PUT validates: url_settings, labels and/or clear_labels, nothing else", async () => {
      await create("put-bad");
      const cases: [unknown, RegExp][] = [
        [{}, /send url_settings, labels and\/or clear_labels/],
        [{ labels: ["ok", " bad"] }, /^labels\.1: must be 1-63 letters/],
        [{ labels: ["a", "a"] }, /^labels: /],
        [{ url_settings: { auth: "everyone" } }, /^url_settings\.auth: must be one of "unit", "public"$/],
        [{ url_settings: {}, name: "x" }, /^name: is not a known field$/],
        [{ url_settings: { private_access: "world" } }, /^url_settings\.private_access: must be one of/],
        [{ url_settings: "public" }, /^url_settings: must be an object$/],
        [
          { url_settings: { auth: "public", private_access: "admins" } },
          /^url_settings\.private_access: applies only when auth is 'unit'/,
        ],
      ];
      for (const [json, re] of cases) {
        const r = await s.api("PUT", "/v1/units/put-bad", { token, json });
        assert.equal(r.status, 400, JSON.stringify(json));
        assert.equal(r.body.code, "UMS_VALIDATION");
        assert.ok(
          r.body.errors.some((e: string) => re.test(e)),
          `${JSON.stringify(json)} -> ${JSON.stringify(r.body.errors)}`,
        );
      }
      assert.equal((await s.api("PUT", "/v1/units/ghost", { token, json: { url_settings: {} } })).status, 404);
    });

    it("labels: set at create, replaced by PUT, omitted when empty (spec 2.1)", async () => {
      const c = await s.api("POST", "/v1/units", { token, json: { name: "labelled", labels: ["ci", "team:a"] } });
      assert.equal(c.status, 201, c.text);
      assert.deepEqual(c.body.labels, ["ci", "team:a"]);
      const bad = await s.api("POST", "/v1/units", { token, json: { name: "labelled2", labels: ["-x"] } });
      assert.equal(bad.status, 400);
      const p = await s.api("PUT", "/v1/units/labelled", { token, json: { labels: ["prod"] } });
      assert.deepEqual(p.body.labels, ["prod"]);
      assert.deepEqual(p.body.url_settings, { auth: "unit" }, "url_settings left alone");
      const cleared = await s.api("PUT", "/v1/units/labelled", { token, json: { labels: [] } });
      assert.equal(cleared.body.labels, undefined);
      assert.equal((await s.api("GET", "/v1/units/labelled", { token })).body.labels, undefined);
    });

    it("deletes a unit: 204, then 404", async () => {
      await create("del-me");
      // Clients often send a JSON content type on a bodiless DELETE: no body is not bad JSON.
      const r = await s.api("DELETE", "/v1/units/del-me", { token, headers: { "content-type": "application/json" } });
      assert.equal(r.status, 204);
      assert.equal(r.text, "");
      assert.equal((await s.api("GET", "/v1/units/del-me", { token })).status, 404);
      assert.equal((await s.api("DELETE", "/v1/units/del-me", { token })).status, 404);
      assert.equal((await create("del-me")).status, 201, "the name is free again");
    });

    it("reports a cold unit as hibernated in the health check", async () => {
      const u = (await create("check-me")).body;
      const r = await s.api("GET", "/v1/units/check-me/check", { token });
      assert.equal(r.status, 200);
      assert.equal(r.body.unit_name, "check-me");
      assert.equal(r.body.unit_id, u.id);
      assert.equal(r.body.status, "hibernated");
      assert.equal(typeof r.body.reason, "string");
      assert.equal(typeof r.body.elapsed, "number");
      assert.ok(Math.abs(Date.parse(r.body.checked_at) - Date.now()) < 60_000);
      assert.equal((await s.api("GET", "/v1/units/nope/check", { token })).status, 404);
    });

    it("upgrades to latest or a known version and rejects others", async () => {
      await create("up");
      const r = await s.api("POST", "/v1/units/up/upgrade", { token, json: { version: "latest" } });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, { name: "up", status: "up_to_date" });
      const same = await s.api("POST", "/v1/units/up/upgrade", { token, json: { version: ENVIRONMENT_VERSION } });
      assert.deepEqual(same.body, { name: "up", status: "up_to_date" });
      const unknown = await s.api("POST", "/v1/units/up/upgrade", { token, json: { version: "v9.9.9-rc9" } });
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.errors[0], /^version: 'v9\.9\.9-rc9' is not available on this server/);
      const bad = await s.api("POST", "/v1/units/up/upgrade", { token, json: { version: "1.2" } });
      assert.equal(bad.status, 400);
      assert.match(bad.body.errors[0], /^version: '1\.2' is neither 'latest' nor a version like v/);
      const missing = await s.api("POST", "/v1/units/up/upgrade", { token, json: {} });
      assert.deepEqual(missing.body.errors, ["version: is required"]);
      const ghost = await s.api("POST", "/v1/units/ghost/upgrade", { token, json: { version: "latest" } });
      assert.equal(ghost.status, 404);
      const ghostBad = await s.api("POST", "/v1/units/ghost/upgrade", { token, json: { version: "nope" } });
      assert.equal(ghostBad.status, 404, "an unknown unit is reported before a bad version");
    });

    it("reports the organization", async () => {
      const t = await s.token("org-info", { limits: { maxUnits: 7, runningLimit: 3, warmLimit: 4 } });
      await s.api("POST", "/v1/units", { token: t, json: { name: "one" } });
      const r = await s.api("GET", "/v1/organization", { token: t });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, {
        organization: {
          slug: "org-info",
          sprites_enabled: true,
          active_sprites: [],
          max_sprites: 7,
          active_sprite_limit: 3,
        },
      });
    });

    it("enforces max_sprites on create, also under concurrent creates", async () => {
      const t = await s.token("limited", { limits: { maxUnits: 3 } });
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => s.api("POST", "/v1/units", { token: t, json: { name: `lim-${i}` } })),
      );
      const ok = results.filter((r) => r.status === 201);
      const refused = results.filter((r) => r.status === 403);
      assert.equal(ok.length, 3);
      assert.equal(refused.length, 7);
      assert.equal(refused[0]?.body.code, "UMS_LIMIT_REACHED");
      assert.match(refused[0]?.body.error, /limit of 3 units/);
      const list = await s.api("GET", "/v1/units", { token: t });
      assert.equal(list.body.sprites.length, 3);
      await s.api("DELETE", `/v1/units/${ok[0]?.body.name}`, { token: t });
      assert.equal((await s.api("POST", "/v1/units", { token: t, json: { name: "lim-again" } })).status, 201);
    });

    it("list reports counts, the org's slug and limits", async () => {
      const t = await s.token("lister", { limits: { runningLimit: 5, warmLimit: 6 } });
      for (const n of ["b", "a", "c"]) await s.api("POST", "/v1/units", { token: t, json: { name: n } });
      const r = await s.api("GET", "/v1/units", { token: t });
      assert.equal(r.status, 200);
      assert.deepEqual(
        r.body.sprites.map((u: { name: string }) => u.name),
        ["a", "b", "c"],
      );
      assert.equal(r.body.has_more, false);
      assert.equal(r.body.next_continuation_token, null);
      assert.equal(r.body.cold, 3);
      assert.equal(r.body.running, 0);
      assert.equal(r.body.warm, 0);
      assert.equal(r.body.name, "lister");
      assert.equal(r.body.running_limit, 5);
      assert.equal(r.body.warm_limit, 6);
      const slash = await s.api("GET", "/v1/units/", { token: t });
      assert.equal(slash.status, 200, "a trailing slash lists too");
      assert.equal(slash.body.sprites.length, 3);
      const pre = await s.api("GET", "/v1/units?prefix=b", { token: t });
      assert.deepEqual(
        pre.body.sprites.map((u: { name: string }) => u.name),
        ["b"],
      );
    });
  });
}
