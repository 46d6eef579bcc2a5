import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../testing/dialects.js";
import { startTestServer, type TestServer } from "../testing/server.js";

for (const dialect of testDialects) {
  describe(`authentication and organization isolation (${dialect.name})`, { skip: dialect.skip }, () => {
    let s: TestServer;
    let alice: string;
    let bob: string;
    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.token("alice");
      bob = await s.token("bob");
      assert.equal((await s.api("POST", "/v1/units", { token: alice, json: { name: "secret" } })).status, 201);
    });
    after(() => s?.close());

    const routes: [string, string, unknown?][] = [
      ["GET", "/v1/units"],
      ["POST", "/v1/units", { name: "x" }],
      ["GET", "/v1/units/secret"],
      ["PUT", "/v1/units/secret", { url_settings: { auth: "public" } }],
      ["DELETE", "/v1/units/secret"],
      ["GET", "/v1/units/secret/check"],
      ["POST", "/v1/units/secret/upgrade", { version: "latest" }],
      ["GET", "/v1/organization"],
      ["GET", "/v1/units/secret/some/proxied/path"],
    ];

    it("answers 401 with WWW-Authenticate on every route without a valid token", async () => {
      const badHeaders: (Record<string, string> | undefined)[] = [
        undefined,
        { authorization: "" },
        { authorization: "Bearer" },
        { authorization: "Basic dXNlcjpwYXNz" },
        { authorization: "Bearer ums_notarealtoken" },
        { authorization: `Bearer ${alice}x` },
        { authorization: `bearer  ${alice} extra` },
      ];
      for (const [method, path, json] of routes) {
        for (const headers of badHeaders) {
          const r = await s.api(method, path, { ...(headers && { headers }), ...(json !== undefined && { json }) });
          assert.equal(r.status, 401, `${method} ${path} ${JSON.stringify(headers)}`);
          assert.equal(r.body.code, "UMS_UNAUTHORIZED");
          assert.equal(typeof r.body.error, "string");
          assert.match(r.headers.get("www-authenticate") ?? "", /^Bearer realm="ums"/);
        }
      }
      assert.equal((await s.api("GET", "/v1/units/secret", { token: alice })).status, 200, "nothing was changed");
    });

    it("accepts the scheme name case-insensitively (RFC 7235 §2.1)", async () => {
      const r = await s.api("GET", "/v1/organization", { headers: { authorization: `bearer ${alice}` } });
      assert.equal(r.status, 200);
      assert.equal(r.body.organization.slug, "alice");
    });

    it("hides another organization's units: 404, never visible, never changed", async () => {
      for (const [method, path, json] of routes.slice(2, 7)) {
        const r = await s.api(method, path, { token: bob, ...(json !== undefined && { json }) });
        assert.equal(r.status, 404, `${method} ${path}`);
        assert.equal(r.body.code, "UMS_UNIT_NOT_FOUND");
      }
      const proxied = await s.api("GET", "/v1/units/secret/some/path", { token: bob });
      assert.equal(proxied.status, 404);
      const list = await s.api("GET", "/v1/units", { token: bob });
      assert.deepEqual(list.body.sprites, []);
      assert.equal(list.body.name, "bob");
      const own = await s.api("GET", "/v1/units/secret", { token: alice });
      assert.equal(own.status, 200);
      assert.deepEqual(own.body.url_settings, { auth: "unit" }, "bob's PUT did not apply");
    });

    it("lets two organizations use the same unit name", async () => {
      const r = await s.api("POST", "/v1/units", { token: bob, json: { name: "secret" } });
      assert.equal(r.status, 201);
      assert.equal(r.body.organization, "bob");
      const a = await s.api("GET", "/v1/units/secret", { token: alice });
      assert.notEqual(a.body.id, r.body.id);
      assert.notEqual(a.body.url, r.body.url);
      await s.api("DELETE", "/v1/units/secret", { token: bob });
      assert.equal((await s.api("GET", "/v1/units/secret", { token: alice })).status, 200, "alice's unit survives");
    });

    it("stops accepting a revoked token at once", async () => {
      const t = await s.token("alice");
      assert.equal((await s.api("GET", "/v1/units", { token: t })).status, 200);
      const [record] = (await s.server.store.tokens.list()).filter((x) => x.orgSlug === "alice").slice(-1);
      assert.ok(record);
      assert.equal(await s.server.store.tokens.revoke(record.id, new Date().toISOString()), true);
      assert.equal((await s.api("GET", "/v1/units", { token: t })).status, 401);
      assert.equal((await s.api("GET", "/v1/units", { token: alice })).status, 200, "other tokens keep working");
    });

    it("serves the OpenAPI document and health without a token", async () => {
      assert.equal((await s.api("GET", "/healthz")).status, 200);
      const r = await s.api("GET", "/v1/openapi.json");
      assert.equal(r.status, 200);
      assert.equal(r.body.openapi, "3.1.0");
    });

    it("answers unknown routes under /v1 with a JSON 404", async () => {
      for (const [method, path] of [
        ["GET", "/v1/nothing"],
        ["POST", "/v1/units/x/y/../../../../etc"],
        ["PATCH", "/v1/units"],
        ["GET", "/v2/units"],
      ] as const) {
        const r = await s.api(method, path, { token: alice });
        assert.equal(r.status, 404, `${method} ${path}`);
        assert.equal(r.headers.get("content-type")?.startsWith("application/json"), true);
        assert.ok(r.body.code === "UMS_ROUTE_NOT_FOUND" || r.body.code === "UMS_UNIT_NOT_FOUND", r.text);
      }
    });
  });
}
