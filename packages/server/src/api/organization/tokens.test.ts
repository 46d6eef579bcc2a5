import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { after, before, describe, it } from "node:test";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

/** Tokens over the API: POST/GET /v1/organizations/{org}/tokens, DELETE …/tokens/{id}. */
describe("organization tokens over the API", () => {
  let s: TestServer;
  let admin: string;
  let member: string;
  let otherAdmin: string;
  const logs: string[] = [];
  const minted: string[] = [];
  const call = (t: string | undefined, method: string, path: string, json?: unknown) =>
    s.api(method, path, { token: t, ...(json !== undefined && { json }) });
  const mint = async (t: string, org: string, json: unknown = {}) => {
    const r = await call(t, "POST", `/v1/organizations/${org}/tokens`, json);
    if (r.status === 201) minted.push(r.body.token);
    return r;
  };
  const live = async (t: string, org = "acme") => {
    const r = await call(t, "GET", `/v1/organizations/${org}/tokens`);
    assert.equal(r.status, 200, r.text);
    return r.body.tokens as { id: string; description: string; role: string }[];
  };

  before(async () => {
    const logStream = new PassThrough();
    logStream.on("data", (d) => logs.push(d.toString()));
    s = await startSqliteServer({ logStream });
    admin = await s.token("acme");
    member = await s.token("acme", { role: "member" });
    otherAdmin = await s.token("other");
  });
  after(() => s?.close());

  it("an admin mints a member token (the public clients' body), answered once; it works at once", async () => {
    const r = await mint(admin, "acme", { description: "Sprite SDK Token", invite_code: "unused" });
    assert.equal(r.status, 201, r.text);
    assert.match(r.body.token, /^ums_[0-9A-Za-z]{43}$/);
    assert.equal(r.body.role, "member", "member unless asked");
    assert.equal(r.body.description, "Sprite SDK Token");
    assert.match(r.body.id, /^tok_/);
    assert.ok(Date.parse(r.body.created_at) > 0);
    assert.equal(r.headers.get("cache-control"), "no-store");
    const me = await call(r.body.token, "GET", "/v1/organization");
    assert.equal(me.status, 200);
    assert.equal(me.body.organization.slug, "acme");
    const listed = (await live(admin)).find((t) => t.id === r.body.id);
    assert.deepEqual(listed && { ...listed, created_at: undefined }, {
      id: r.body.id,
      description: "Sprite SDK Token",
      role: "member",
      created_at: undefined,
      last_used_at: (listed as { last_used_at?: string | null } | undefined)?.last_used_at,
      expires_at: null,
    });
    const admin2 = await mint(admin, "acme", { role: "admin" });
    assert.equal(admin2.body.role, "admin");
    assert.equal(admin2.body.description, "api");
    assert.equal((await live(admin2.body.token)).length, (await live(admin)).length, "a new admin token lists too");
  });

  it("lists never a secret", async () => {
    const r = await call(admin, "GET", "/v1/organizations/acme/tokens");
    assert.equal(r.status, 200);
    for (const t of r.body.tokens) {
      assert.deepEqual(Object.keys(t).sort(), [
        "created_at",
        "description",
        "expires_at",
        "id",
        "last_used_at",
        "role",
      ]);
    }
    for (const secret of [admin, member, ...minted]) assert.ok(!r.text.includes(secret), "a secret in the list");
  });

  it("member tokens cannot mint, list or revoke: 403 UMS_ADMIN_REQUIRED", async () => {
    const before = (await live(admin)).length;
    const minted = (await mint(admin, "acme")).body.token as string;
    for (const t of [member, minted]) {
      for (const [m, p, body] of [
        ["POST", "/v1/organizations/acme/tokens", { role: "admin" }],
        ["GET", "/v1/organizations/acme/tokens", undefined],
        ["DELETE", `/v1/organizations/acme/tokens/${(await live(admin))[0]?.id}`, undefined],
      ] as const) {
        const r = await call(t, m, p, body);
        assert.equal(r.status, 403, `${m} ${p}: ${r.text}`);
        assert.equal(r.body.code, "UMS_ADMIN_REQUIRED");
      }
    }
    assert.equal((await live(admin)).length, before + 1, "nothing minted or revoked by members");
    assert.equal((await call(undefined, "GET", "/v1/organizations/acme/tokens")).status, 401);
  });

  it("another organization's slug is refused as one that does not exist; its tokens are out of reach", async () => {
    const acmeIds = (await live(admin)).map((t) => t.id);
    const answers = [];
    for (const org of ["acme", "no-such-org"]) {
      for (const [m, p, body] of [
        ["POST", `/v1/organizations/${org}/tokens`, { role: "admin" }],
        ["GET", `/v1/organizations/${org}/tokens`, undefined],
        ["DELETE", `/v1/organizations/${org}/tokens/${acmeIds[0]}`, undefined],
      ] as const) {
        const r = await call(otherAdmin, m, p, body);
        assert.equal(r.status, 404, `${m} ${p}: ${r.text}`);
        assert.equal(r.body.code, "UMS_ORGANIZATION_NOT_FOUND");
        assert.ok(!r.text.includes(org), "the answer does not echo the slug");
        answers.push(r.text);
      }
    }
    assert.deepEqual(answers.slice(0, 3), answers.slice(3), "an existing and a missing organization answer alike");
    // An acme token id through other's own path: not other's token.
    const r = await call(otherAdmin, "DELETE", `/v1/organizations/other/tokens/${acmeIds[0]}`);
    assert.equal(r.status, 404);
    assert.equal(r.body.code, "UMS_TOKEN_NOT_FOUND");
    assert.deepEqual(
      (await live(admin)).map((t) => t.id),
      acmeIds,
      "acme's tokens unchanged",
    );
    assert.ok(!(await live(otherAdmin, "other")).some((t) => acmeIds.includes(t.id)));
  });

  it("a revoked token gets 401 at once; revoking again is 404", async () => {
    const m = await mint(admin, "acme", { description: "short-lived" });
    assert.equal((await call(m.body.token, "GET", "/v1/organization")).status, 200);
    assert.equal((await call(admin, "DELETE", `/v1/organizations/acme/tokens/${m.body.id}`)).status, 204);
    const after = await call(m.body.token, "GET", "/v1/organization");
    assert.equal(after.status, 401);
    assert.equal(after.body.code, "UMS_UNAUTHORIZED");
    assert.ok(!(await live(admin)).some((t) => t.id === m.body.id), "gone from the list");
    const again = await call(admin, "DELETE", `/v1/organizations/acme/tokens/${m.body.id}`);
    assert.equal(again.status, 404);
    assert.equal(again.body.code, "UMS_TOKEN_NOT_FOUND");
  });

  it("the organization's last admin token cannot be revoked over the API: 409 UMS_LAST_ADMIN_TOKEN", async () => {
    const solo = await s.token("solo");
    const [own] = await live(solo, "solo");
    assert.ok(own);
    const refused = await call(solo, "DELETE", `/v1/organizations/solo/tokens/${own.id}`);
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.code, "UMS_LAST_ADMIN_TOKEN");
    assert.equal((await call(solo, "GET", "/v1/organization")).status, 200, "still works");
    const next = await mint(solo, "solo", { role: "admin" });
    assert.equal(
      (await call(solo, "DELETE", `/v1/organizations/solo/tokens/${own.id}`)).status,
      204,
      "not the last one now",
    );
    assert.equal((await call(solo, "GET", "/v1/organization")).status, 401, "revoked itself");
    const last = await call(next.body.token, "DELETE", `/v1/organizations/solo/tokens/${next.body.id}`);
    assert.equal(last.body.code, "UMS_LAST_ADMIN_TOKEN");
  });

  it("bad bodies answer 400 naming the field and create nothing", async () => {
    const before = (await live(admin)).length;
    for (const [body, field] of [
      [{ description: "" }, /^description: /],
      [{ description: "x".repeat(101) }, /^description: /],
      [{ description: "two\nlines" }, /^description: /],
      [{ role: "owner" }, /^role: /],
      [{ role: null }, /^role: /],
      [{ secret: "mine" }, /^secret: is not a known field/],
      [{ description: 7 }, /^description: /],
    ] as const) {
      const r = await call(admin, "POST", "/v1/organizations/acme/tokens", body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.body.code, "UMS_VALIDATION");
      assert.match(r.body.errors[0], field);
    }
    const notJson = await s.api("POST", "/v1/organizations/acme/tokens", {
      token: admin,
      body: "{",
      headers: { "content-type": "application/json" },
    });
    assert.equal(notJson.status, 400);
    assert.equal((await live(admin)).length, before);
  });

  it("no secret in the log", () => {
    const log = logs.join("");
    assert.match(log, /token created/);
    assert.match(log, /token revoked/);
    assert.ok(minted.length >= 5);
    for (const secret of [admin, member, otherAdmin, ...minted])
      assert.ok(!log.includes(secret), "a secret in the log");
  });
});
