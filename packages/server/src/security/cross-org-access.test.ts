import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { B_FILE, crossOrgSuite, EXAMPLES, type Example, type Target } from "../testing/cross-org-fixture.js";
import { execHttp } from "../testing/exec-client.js";
import { openWebsocket, request } from "../testing/unit-app.js";

// Issue 19, "cross-organization access on every route" (the suite, its organizations and B's things:
// testing/cross-org-fixture.ts). This file: B's unit URL, B's connectors (at the API and at the gateway
// from A's unit) and the organization-level routes. Every unit route: cross-org.test.ts.

describe("cross-organization access on every route", { timeout: 15 * 60_000 }, () => {
  const x = crossOrgSuite();
  const { call, noLeak, b, id } = x;

  it("the unit URL of B's unit refuses A's token and A's session; the proxy path answers 404", async () => {
    const get = (host: string, headers: Record<string, string> = {}, opts: { method?: string; body?: string } = {}) =>
      request(`${x.s.url}/cross/org`, { ...opts, headers: { host, ...headers } });
    // Positive control: B's token reaches B's app.
    assert.equal((await get(x.bHost, { authorization: `Bearer ${x.tB}` })).status, 200);
    const bearer = await get(x.bHost, { authorization: `Bearer ${x.tA}`, accept: "application/json" });
    assert.equal(bearer.status, 404);
    assert.equal(JSON.parse(bearer.body.toString()).code, ErrorCode.UnitNotFound);
    // A logs in at its own unit URL; its session cookie is worth nothing at B's.
    const login = await request(`${x.s.url}/.ums/login`, {
      method: "POST",
      headers: { host: x.aHost, "content-type": "application/x-www-form-urlencoded" },
      body: `token=${encodeURIComponent(x.tA)}&next=/`,
    });
    assert.equal(login.status, 303);
    const cookie = String(login.headers["set-cookie"]).split(";")[0] ?? "";
    assert.ok(cookie.includes("="), "A has a session");
    const replay = await get(x.bHost, { cookie, accept: "application/json" });
    assert.equal(replay.status, 401);
    // Logging in at B's unit URL with A's token: refused, no cookie.
    const foreignLogin = await request(`${x.s.url}/.ums/login`, {
      method: "POST",
      headers: { host: x.bHost, "content-type": "application/x-www-form-urlencoded" },
      body: `token=${encodeURIComponent(x.tA)}&next=/`,
    });
    assert.equal(foreignLogin.status, 401);
    assert.equal(foreignLogin.headers["set-cookie"], undefined);
    const ws = await openWebsocket(`${x.s.url}/ws`, { host: x.bHost, authorization: `Bearer ${x.tA}` });
    ws.socket.destroy();
    assert.equal(ws.status, 404);
    for (const r of [bearer, replay, foreignLogin]) noLeak("unit URL", x.bHost, r.body.toString());
  });

  it("connectors: B's connectors and OAuth state are not A's, at the API and at the gateway from A's unit", async () => {
    for (const m of ["GET", "PUT", "PATCH", "DELETE"]) {
      const key = `${m} /v1/oauth/connections/{id}`;
      for (const conn of [b.conn, b.adminConn]) {
        const ex = (EXAMPLES[key] as (t: Target) => Example)({} as Target);
        const r = await call(x.tA, m, `/v1/oauth/connections/${conn}`, ex);
        assert.equal(r.status, 404, `${key}: ${r.text}`);
        assert.equal(r.body.code, ErrorCode.ConnectionNotFound);
      }
    }
    // From inside A's unit: B's connectors through the gateway, and A's admin connector aimed at B's unit.
    const seen0 = x.api.seen.length;
    const reqs = [
      { path: `/v1/gateway/custom_api/${b.conn}/anything` },
      { path: `/v1/gateway/sprites_admin/${b.adminConn}/v1/units` },
      { path: `/v1/gateway/sprites_admin/${x.aAdminConn}/v1/units/bonly` },
      { path: `/v1/gateway/sprites_admin/${x.aAdminConn}/v1/units/bonly/fs/read?path=${B_FILE}&workingDir=/` },
      { path: `/v1/gateway/sprites_admin/${x.aAdminConn}/v1/units` },
    ];
    const r = await execHttp(x.s.url, x.tA, "shared", [
      "/.unit/bin/node",
      "/tmp/gw.mjs",
      x.aGateway,
      JSON.stringify(reqs),
    ]);
    assert.equal(r.exitCode, 0, r.stderr.toString());
    const out = JSON.parse(r.stdout.toString()) as { status: number; text: string }[];
    assert.deepEqual(
      out.map((x) => x.status),
      [404, 404, 404, 404, 200],
      JSON.stringify(out),
    );
    const listed = JSON.parse(out[4]?.text ?? "{}").sprites as { id: string }[];
    assert.deepEqual(
      listed.map((u) => u.id),
      [id.aShared],
      "A's admin connector lists A's units only",
    );
    for (const x of out) noLeak("gateway", JSON.stringify(reqs), x.text);
    assert.equal(x.api.seen.length, seen0, "B's provider was not called for A");
  });

  it("organization-level routes answer A's own things only", async () => {
    const list = await call(x.tA, "GET", "/v1/units");
    assert.deepEqual(
      list.body.sprites.map((u: { id: string }) => u.id),
      [id.aShared],
    );
    const org = await call(x.tA, "GET", "/v1/organization");
    assert.equal(org.status, 200);
    assert.ok(!JSON.stringify(org.body).includes("beta"), JSON.stringify(org.body));
    assert.equal((await call(x.tA, "GET", "/v1/oauth/providers")).status, 200); // the registry: the same for everyone
    // Issue #15: the nodes are the server's (hosts and their unit counts): nothing of B's in them.
    const nodes = await call(x.tA, "GET", "/v1/nodes");
    assert.equal(nodes.status, 200, nodes.text);
    noLeak("A: GET /v1/nodes", "", nodes.text);
    const conns = await call(x.tA, "GET", "/v1/oauth/connections");
    assert.deepEqual(
      conns.body.connections.map((c: { id: string }) => c.id),
      [x.aAdminConn],
    );
    const key = await call(x.tA, "POST", "/v1/oauth/connections/api_key", {
      json: { provider: "custom_api", api_key: "a-key", base_api_url: x.api.url },
    });
    assert.equal(key.status, 201, key.text);
    const prov = await call(x.tA, "POST", "/v1/oauth/connections/provision", { json: { provider: "sprites_admin" } });
    assert.equal(prov.status, 201, prov.text);
    const authorize = await call(x.tA, "GET", "/v1/oauth/github/authorize?redirect_uri=https://app.example/cb");
    assert.equal(authorize.status, 200);
    assert.notEqual(authorize.body.state, b.state);
    // B's OAuth state cannot be completed by A.
    const cb = await call(x.tA, "POST", "/v1/oauth/github/callback", {
      json: { code: "x", state: b.state, redirect_uri: "https://app.example/cb" },
    });
    assert.equal(cb.status, 400, cb.text);
    // B's tokens: B's organization in the path is not found for A (as a missing one); a token id of
    // B's through A's own path is not A's.
    const bTokens = await call(x.tB, "GET", "/v1/organizations/beta/tokens");
    assert.equal(bTokens.status, 200, bTokens.text);
    const bTokenId = bTokens.body.tokens[0]?.id as string;
    const tokens = [];
    for (const [m, p, json] of [
      ["POST", "/v1/organizations/beta/tokens", { role: "admin" }],
      ["GET", "/v1/organizations/beta/tokens", undefined],
      ["DELETE", `/v1/organizations/beta/tokens/${bTokenId}`, undefined],
      ["DELETE", `/v1/organizations/alpha/tokens/${bTokenId}`, undefined],
      ["GET", "/v1/organizations/beta/audit", undefined],
    ] as const) {
      const r = await call(x.tA, m, p, json === undefined ? {} : { json });
      assert.equal(r.status, 404, `${m} ${p}: ${r.text}`);
      assert.equal(r.body.code, p.includes("/beta/") ? ErrorCode.OrganizationNotFound : ErrorCode.TokenNotFound);
      tokens.push(r);
    }
    const ids = (r: { body: { tokens: { id: string; role: string }[] } }) =>
      r.body.tokens.map((t) => `${t.id} ${t.role}`);
    assert.deepEqual(
      ids(await call(x.tB, "GET", "/v1/organizations/beta/tokens")),
      ids(bTokens),
      "B's tokens as they were",
    );
    // A may name a unit like B's: it is A's own, another unit.
    const mine = await call(x.tA, "POST", "/v1/units", { json: { name: "bonly" } });
    assert.equal(mine.status, 201, mine.text);
    assert.notEqual(mine.body.id, id.bOnly);
    assert.equal((await call(x.tA, "DELETE", "/v1/units/bonly")).status, 204);
    assert.equal((await call(x.tA, "DELETE", "/v1/units/shared")).status, 204);
    for (const r of [list, org, conns, key, prov, authorize, cb, mine, ...tokens]) noLeak("org-level", "", r.text);
  });

  it("nothing of B changed, and B still reaches all of it", () => x.bUnchanged());
});
