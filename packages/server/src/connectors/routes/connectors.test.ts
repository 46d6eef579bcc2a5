import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import {
  type FakeOAuth,
  fakeBearerApi,
  fakeGithub,
  fakeOAuth,
  writeConnectorsConfig,
} from "../../testing/fake-providers.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

/** Spec 4.8 against fake providers on loopback, for every database. */
for (const dialect of testDialects) {
  describe(`connectors API (${dialect.name})`, { skip: dialect.skip }, () => {
    let s: TestServer;
    let token: string;
    let other: string;
    let oauth: FakeOAuth;
    let api: Awaited<ReturnType<typeof fakeBearerApi>>;
    let dir: string;
    const logs: string[] = [];
    const secrets: string[] = [];
    const platformKey = `pk-platform-${Date.now()}`;

    before(async () => {
      oauth = await fakeOAuth();
      api = await fakeBearerApi();
      dir = await mkdtemp(join(tmpdir(), "ums-conn-"));
      secrets.push(oauth.clientSecret, platformKey);
      const cfg = await writeConnectorsConfig(dir, {
        providers: { github: fakeGithub(oauth, api) },
        platformKeys: { openai: platformKey },
      });
      const logStream = new PassThrough();
      logStream.on("data", (d) => logs.push(d.toString()));
      s = await startTestServer(dialect, { connectorsConfig: cfg, logStream });
      token = await s.token("acme");
      other = await s.token("other");
    });
    after(async () => {
      await s?.close();
      await oauth?.close();
      await api?.close();
      await rm(dir, { recursive: true, force: true });
    });

    const call = (method: string, path: string, json?: unknown, t = token) =>
      s.api(method, path, { token: t, ...(json !== undefined && { json }) });

    it("lists the 25 providers of the registry, with overridden URLs", async () => {
      const r = await call("GET", "/v1/oauth/providers");
      assert.equal(r.status, 200);
      const keys = r.body.providers.map((p: { key: string }) => p.key);
      assert.equal(keys.length, 25);
      assert.equal(new Set(keys).size, 25);
      for (const k of ["custom_api", "s3_object_store", "sprites_admin", "github", "upstash_redis"])
        assert.ok(keys.includes(k));
      const gh = r.body.providers.find((p: { key: string }) => p.key === "github");
      assert.equal(gh.api_base_url, api.url);
      assert.equal(gh.oauth, true);
      assert.equal(gh.authorize_url, `${oauth.url}/authorize`);
      assert.equal(gh.token_url, `${oauth.url}/token`);
      assert.deepEqual(gh.default_scopes, ["repo", "read:user"]);
      assert.equal(r.body.providers.find((p: { key: string }) => p.key === "openai").platform_keys, true);
      assert.equal(r.body.providers.find((p: { key: string }) => p.key === "s3_object_store").auth, "sigv4");
      assert.equal((await s.api("GET", "/v1/oauth/providers")).status, 401);
    });

    it("api_key: stored, never returned; base_api_url rules", async () => {
      const key = `ghp_${Date.now()}secretkey`;
      secrets.push(key);
      const r = await call("POST", "/v1/oauth/connections/api_key", {
        provider: "github",
        api_key: key,
        access_policy: { allow_all: true },
      });
      assert.equal(r.status, 201, r.text);
      const c = r.body.connection;
      assert.match(c.id, /^conn_[a-z0-9]+$/);
      assert.equal(c.connection_type, "api_key");
      assert.deepEqual(c.access_policy, { allow_all: true });
      assert.match(c.usage_snippet, new RegExp(`^curl http://ums\\.internal:\\d+/v1/gateway/github/${c.id}/`));
      assert.ok(!r.text.includes(key));
      // The key-value database: base_api_url required, HTTPS only.
      const kv = (b: object) =>
        call("POST", "/v1/oauth/connections/api_key", { provider: "upstash_redis", api_key: "k", ...b });
      assert.match((await kv({})).body.errors[0], /base_api_url: required/);
      assert.match((await kv({ base_api_url: "http://db.example.com" })).body.errors[0], /https/);
      assert.match((await kv({ base_api_url: "https://u:p@db.example.com" })).body.errors[0], /credentials/);
      const ok = await kv({ base_api_url: "https://db.example.com/" });
      assert.equal(ok.status, 201);
      assert.equal(ok.body.connection.provider_info.base_api_url, "https://db.example.com");
      // custom_api: required; private addresses refused unless the server allows them.
      const custom = (b: object) =>
        call("POST", "/v1/oauth/connections/api_key", { provider: "custom_api", api_key: "k", ...b });
      assert.equal((await custom({})).status, 400);
      assert.match((await custom({ base_api_url: "http://127.0.0.1:1" })).body.errors[0], /loopback/);
      assert.equal((await custom({ base_api_url: "https://api.example.com/v2" })).status, 201);
      // Validation of the policy and the provider.
      assert.equal(
        (await call("POST", "/v1/oauth/connections/api_key", { provider: "nope", api_key: "k" })).status,
        400,
      );
      const badPolicy = await call("POST", "/v1/oauth/connections/api_key", {
        provider: "github",
        api_key: "k",
        access_policy: { allowed_endpoints: ["repos"] },
      });
      assert.equal(badPolicy.status, 400);
      assert.match(badPolicy.body.errors[0], /allowed_endpoints/);
      assert.equal(
        (await call("POST", "/v1/oauth/connections/api_key", { provider: "sprites_admin", api_key: "k" })).status,
        400,
      );
    });

    it("provision: platform keys from configuration; 400 naming the reason otherwise", async () => {
      const r = await call("POST", "/v1/oauth/connections/provision", { provider: "openai" });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.body.connection.connection_type, "provisioned");
      const none = await call("POST", "/v1/oauth/connections/provision", { provider: "anthropic" });
      assert.equal(none.status, 400);
      assert.match(none.body.errors[0], /no platform key for 'anthropic'/);
      const unsupported = await call("POST", "/v1/oauth/connections/provision", { provider: "github" });
      assert.match(unsupported.body.errors[0], /does not support platform-managed keys/);
      const admin = await call("POST", "/v1/oauth/connections/provision", { provider: "sprites_admin" });
      assert.equal(admin.status, 201);
      assert.equal(admin.body.connection.connection_type, "internal");
    });

    it("get, PUT/PATCH policy, list with filter, delete; other organizations see nothing", async () => {
      const c = (await call("POST", "/v1/oauth/connections/api_key", { provider: "stripe", api_key: "sk_test_x" })).body
        .connection;
      assert.deepEqual(c.access_policy, {}, "no policy: denies until updated");
      assert.equal((await call("GET", `/v1/oauth/connections/${c.id}`)).body.connection.id, c.id);
      assert.equal((await call("GET", `/v1/oauth/connections/${c.id}`, undefined, other)).status, 404);
      const put = await call("PUT", `/v1/oauth/connections/${c.id}`, { access_policy: { name_prefix: "ci-" } });
      assert.equal(put.status, 200);
      assert.deepEqual(put.body.connection.access_policy, { name_prefix: "ci-" });
      const patch = await call("PATCH", `/v1/oauth/connections/${c.id}`, { access_policy: { sprite_labels: ["a"] } });
      assert.deepEqual(patch.body.connection.access_policy, { sprite_labels: ["a"] }, "replaced, not merged");
      assert.equal((await call("PUT", `/v1/oauth/connections/${c.id}`, {})).status, 400);
      assert.equal((await call("PUT", `/v1/oauth/connections/${c.id}`, { access_policy: {} }, other)).status, 404);
      const list = await call("GET", "/v1/oauth/connections?provider=stripe");
      assert.deepEqual(
        list.body.connections.map((x: { id: string }) => x.id),
        [c.id],
      );
      assert.equal((await call("GET", "/v1/oauth/connections", undefined, other)).body.connections.length, 0);
      assert.equal((await call("DELETE", `/v1/oauth/connections/${c.id}`, undefined, other)).status, 404);
      assert.equal((await call("DELETE", `/v1/oauth/connections/${c.id}`)).status, 204);
      assert.equal((await call("GET", `/v1/oauth/connections/${c.id}`)).status, 404);
      assert.equal((await call("DELETE", `/v1/oauth/connections/${c.id}`)).status, 404);
    });

    it("OAuth: authorize, provider consent, POST callback; state bound to the organization", async () => {
      const a = await call("GET", "/v1/oauth/github/authorize?scopes=repo,gist&redirect_uri=https://app.example/cb");
      assert.equal(a.status, 200, a.text);
      const url = new URL(a.body.authorize_url);
      assert.equal(url.origin + url.pathname, `${oauth.url}/authorize`);
      assert.equal(url.searchParams.get("scope"), "repo gist");
      assert.equal(url.searchParams.get("state"), a.body.state);
      const consent = await fetch(url, { redirect: "manual" });
      const back = new URL(consent.headers.get("location") ?? "");
      const code = back.searchParams.get("code") ?? "";
      // Another organization cannot complete it; nor can a tampered state or another redirect URI.
      const foreign = await call("POST", "/v1/oauth/github/callback", { code, state: a.body.state }, other);
      assert.equal(foreign.status, 400);
      assert.match(foreign.body.errors[0], /^state: is not one this server issued to this organization/);
      const tampered = await call("POST", "/v1/oauth/github/callback", { code, state: `${a.body.state}x` });
      assert.equal(tampered.status, 400);
      const wrongUri = await call("POST", "/v1/oauth/github/callback", {
        code,
        state: a.body.state,
        redirect_uri: "https://evil.example/cb",
      });
      assert.match(wrongUri.body.errors[0], /redirect_uri/);
      const r = await call("POST", "/v1/oauth/github/callback", {
        code,
        state: a.body.state,
        redirect_uri: "https://app.example/cb",
        access_policy: { allow_all: true },
      });
      assert.equal(r.status, 201, r.text);
      const c = r.body.connection;
      assert.equal(c.connection_type, "oauth");
      assert.equal(c.scopes, "repo,gist");
      assert.equal(c.provider_account_id, "acct-42");
      assert.ok(Date.parse(c.token_expires_at) > Date.now());
      // A state completes one authorization: a replay is refused before the provider is asked.
      const replay = await call("POST", "/v1/oauth/github/callback", { code, state: a.body.state });
      assert.equal(replay.status, 400);
      assert.match(replay.body.errors[0], /^state: was used already/);
      // add_scopes: added to the scopes already granted, on the same connector.
      const more = await call(
        "GET",
        "/v1/oauth/github/authorize?add_scopes=workflow&redirect_uri=https://app.example/cb",
      );
      assert.equal(new URL(more.body.authorize_url).searchParams.get("scope"), "repo gist workflow");
      const consent2 = await fetch(more.body.authorize_url, { redirect: "manual" });
      const code2 = new URL(consent2.headers.get("location") ?? "").searchParams.get("code");
      const r2 = await call("POST", "/v1/oauth/github/callback", { code: code2, state: more.body.state });
      assert.equal(r2.body.connection.id, c.id);
      assert.equal(r2.body.connection.scopes, "repo,gist,workflow");
      // Providers without OAuth or without a client here.
      assert.match((await call("GET", "/v1/oauth/stripe/authorize")).body.errors[0], /does not use OAuth/);
      assert.match((await call("GET", "/v1/oauth/gitlab/authorize")).body.errors[0], /no OAuth client/);
      assert.equal((await call("GET", "/v1/oauth/nope/authorize")).status, 404);
    });

    it("OAuth: the browser redirect lands on GET callback and shows that the connector is ready", async () => {
      const a = await call("GET", "/v1/oauth/github/authorize");
      const redirect = new URL(a.body.authorize_url).searchParams.get("redirect_uri");
      assert.equal(redirect, `${s.url}/v1/oauth/github/callback`);
      const consent = await fetch(a.body.authorize_url, { redirect: "manual" });
      const page = await fetch(consent.headers.get("location") ?? "", { redirect: "manual" });
      const html = await page.text();
      assert.equal(page.status, 200, html);
      assert.match(page.headers.get("content-type") ?? "", /text\/html/);
      assert.match(html, /Connector ready/);
      const id = /(conn_[a-z0-9]+)/.exec(html)?.[1];
      const c = await call("GET", `/v1/oauth/connections/${id}`);
      assert.equal(c.status, 200);
      assert.deepEqual(c.body.connection.access_policy, {});
      const bad = await fetch(`${s.url}/v1/oauth/github/callback?code=x&state=forged.sig`);
      assert.equal(bad.status, 400);
      assert.match(await bad.text(), /not created/);
    });

    it("OAuth: a caller's state goes into the URL as given; its organization stays on the server", async () => {
      const given = `app+csrf/${Date.now()}=&#%20x~`;
      secrets.push(given);
      const a = await call("GET", `/v1/oauth/github/authorize?state=${encodeURIComponent(given)}`);
      assert.equal(a.status, 200, a.text);
      assert.equal(a.body.state, given);
      assert.equal(new URL(a.body.authorize_url).searchParams.get("state"), given, "in the URL exactly as given");
      // In use: refused for this organization and for another one (which gets no binding to it).
      for (const t of [token, other]) {
        const again = await call("GET", `/v1/oauth/github/authorize?state=${encodeURIComponent(given)}`, undefined, t);
        assert.equal(again.status, 400);
        assert.match(again.body.errors[0], /^state: is in use/);
      }
      // Bounded length and charset, named in the answer; nothing recorded.
      for (const bad of [
        "short",
        "has a space in it ok",
        "x".repeat(513),
        "ctl\u0001character-here",
        "ünïcödé-state-value",
      ]) {
        const r = await call("GET", `/v1/oauth/github/authorize?state=${encodeURIComponent(bad)}`);
        assert.equal(r.status, 400, bad);
        assert.equal(r.body.code, "UMS_VALIDATION");
        assert.match(r.body.errors[0], /^state: must be 16 to 512 printable ASCII characters/);
      }
      // The provider sends the browser back with the state as given; the callback finds the organization by it.
      const consent = await fetch(a.body.authorize_url, { redirect: "manual" });
      const back = new URL(consent.headers.get("location") ?? "");
      assert.equal(back.searchParams.get("state"), given);
      const forged = new URL(back);
      forged.searchParams.set("state", `${given}-not-issued`);
      const unknown = await fetch(forged, { redirect: "manual" });
      assert.equal(unknown.status, 400);
      assert.match(await unknown.text(), /not one this server issued/);
      const before = (await call("GET", "/v1/oauth/connections", undefined, other)).body.connections.length;
      const page = await fetch(back, { redirect: "manual" });
      const html = await page.text();
      assert.equal(page.status, 200, html);
      const id = /(conn_[a-z0-9]+)/.exec(html)?.[1];
      assert.equal(
        (await call("GET", `/v1/oauth/connections/${id}`)).status,
        200,
        "made in the organization that authorized",
      );
      assert.equal((await call("GET", `/v1/oauth/connections/${id}`, undefined, other)).status, 404);
      assert.equal((await call("GET", "/v1/oauth/connections", undefined, other)).body.connections.length, before);
      // Used: another callback with it is refused, and it cannot start a new authorization while kept.
      const twice = await fetch(back, { redirect: "manual" });
      assert.equal(twice.status, 400);
      assert.match(await twice.text(), /used already/);
      const reuse = await call("GET", `/v1/oauth/github/authorize?state=${encodeURIComponent(given)}`);
      assert.match(reuse.body.errors[0], /^state: is in use/);
      // A state issued for one provider is unknown to another's callback.
      const b = await call("GET", "/v1/oauth/github/authorize");
      assert.equal(b.body.state.length, 43, "generated when omitted");
      const cross = await call("POST", "/v1/oauth/slack/callback", { code: "c", state: b.body.state });
      assert.equal(cross.status, 400);
    });

    it("the gateway answers no one but units: 401 on the API and from the host", async () => {
      const r = await call("GET", "/v1/gateway/github/conn_abc/user");
      assert.equal(r.status, 401);
      assert.equal(r.body.code, "UMS_GATEWAY_UNAUTHORIZED");
      const g = await fetch(`http://127.0.0.1:${s.server.gatewayPort}/v1/gateway/github/conn_abc/user`);
      assert.equal(g.status, 401);
      assert.equal(((await g.json()) as { code: string }).code, "UMS_GATEWAY_UNAUTHORIZED");
    });

    it("no secret appears in a response, the log or the database file", async () => {
      secrets.push(...oauth.issued);
      const everything = [
        (await call("GET", "/v1/oauth/connections")).text,
        ...(await Promise.all(
          (
            await call("GET", "/v1/oauth/connections")
          ).body.connections.map(
            async (c: { id: string }) => (await call("GET", `/v1/oauth/connections/${c.id}`)).text,
          ),
        )),
      ].join("\n");
      const log = logs.join("");
      assert.ok(log.length > 1000, "the log was captured");
      const db = dialect.name === "sqlite" ? (await readFile(join(s.config.dataDir, "ums.db"))).toString("latin1") : "";
      assert.ok(secrets.length >= 6);
      for (const secret of secrets) {
        assert.ok(!everything.includes(secret), "a response carries a secret");
        assert.ok(!log.includes(secret), "the log carries a secret");
        if (db) assert.ok(!db.includes(secret), "the database file carries a secret in clear");
      }
    });
  });
}
