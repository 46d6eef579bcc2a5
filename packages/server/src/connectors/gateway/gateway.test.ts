import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { testDialects } from "../../testing/dialects.js";
import { execHttp } from "../../testing/exec-client.js";
import {
  type FakeOAuth,
  fakeBearerApi,
  fakeGithub,
  fakeOAuth,
  fakeS3,
  selfSignedCert,
  writeConnectorsConfig,
} from "../../testing/fake-providers.js";
import { GATEWAY_CLIENT } from "../../testing/gateway-client.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

const sqlite = testDialects[0];
const execFileP = promisify(execFile);
/** grep the whole unit (but /proc, /sys, /dev) for the string on stdin (/dev/stdin is a socket there). */
const GREP = ["sh", "-c", 'grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e "$(cat)" /'];

interface Req {
  path: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  bodyBytes?: number;
  timeoutMs?: number;
}
interface Res {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** Which of the client's connections it went on (1, 2, …). */
  socket?: number;
}

/** Issue #7: the gateway, called from inside real units, against fake providers on the host's loopback. */
describe("connector gateway from inside units", () => {
  let s: TestServer;
  let token: string;
  let oauth: FakeOAuth;
  let api: Awaited<ReturnType<typeof fakeBearerApi>>;
  let s3: Awaited<ReturnType<typeof fakeS3>>;
  let plain: Awaited<ReturnType<typeof fakeBearerApi>>;
  /** HTTPS providers: one whose certificate the connectors config trusts (caFile), one it does not. */
  let trusted: Awaited<ReturnType<typeof fakeBearerApi>>;
  let untrusted: Awaited<ReturnType<typeof fakeBearerApi>>;
  let dir: string;
  const logs: string[] = [];
  const secrets: string[] = [];
  const gw: Record<string, string> = {};
  const conn: Record<string, string> = {};
  const s3Secret = `s3secret${Date.now()}`;
  const customKey = `custom-key-${Date.now()}`;

  const call = (method: string, path: string, json?: unknown, t = token) =>
    s.api(method, path, { token: t, ...(json !== undefined && { json }) });

  /** Runs requests in unit `unit` against its gateway address. */
  async function inUnit(unit: string, reqs: Req[]): Promise<Res[]> {
    const r = await execHttp(s.url, token, unit, [
      "/.unit/bin/node",
      "/tmp/gw.mjs",
      gw[unit] as string,
      JSON.stringify(reqs),
    ]);
    assert.equal(r.exitCode, 0, r.stderr.toString());
    return JSON.parse(r.stdout.toString());
  }
  const gwPath = (provider: string, key: string, path: string) => `/v1/gateway/${provider}/${conn[key]}${path}`;

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    oauth = await fakeOAuth();
    api = await fakeBearerApi(oauth.valid);
    s3 = await fakeS3("AKIDEXAMPLE", s3Secret);
    plain = await fakeBearerApi();
    dir = await mkdtemp(join(tmpdir(), "ums-gw-"));
    const ca = await selfSignedCert(dir, "trusted-provider");
    trusted = await fakeBearerApi(undefined, ca);
    untrusted = await fakeBearerApi(undefined, await selfSignedCert(dir, "unknown-provider"));
    const cfg = await writeConnectorsConfig(dir, {
      allowPrivateBaseUrls: true,
      caFile: ca.certFile,
      providers: { github: fakeGithub(oauth, api), s3_object_store: { region: "eu-west-1" } },
    });
    const logStream = new PassThrough();
    logStream.on("data", (d) => logs.push(d.toString()));
    s = await startTestServer(sqlite, { connectorsConfig: cfg, logStream, bodyIdleTimeout: "2s" });
    token = await s.token("acme");
    secrets.push(s3Secret, customKey, oauth.clientSecret);
    for (const [name, labels] of [
      ["ci-runner", ["ci", "prod"]],
      ["web", []],
    ] as const) {
      const u = await call("POST", "/v1/units", { name, labels });
      assert.equal(u.status, 201, u.text);
      const w = await execHttp(s.url, token, name, ["sh", "-c", "cat > /tmp/gw.mjs"], { stdin: GATEWAY_CLIENT });
      assert.equal(w.exitCode, 0);
      const net = JSON.parse(await readFile(join(s.config.dataDir, "run", u.body.id, "network.json"), "utf8"));
      gw[name] = `http://${net.hostIp}:${s.server.gatewayPort}`;
    }
    // OAuth connector with a token about to expire: the gateway refreshes it before use.
    oauth.expiresIn = 30;
    const a = await call("GET", "/v1/oauth/github/authorize?redirect_uri=https://app.example/cb");
    const consent = await fetch(a.body.authorize_url, { redirect: "manual" });
    const code = new URL(consent.headers.get("location") ?? "").searchParams.get("code");
    const cb = await call("POST", "/v1/oauth/github/callback", {
      code,
      state: a.body.state,
      access_policy: { allow_all: true },
    });
    assert.equal(cb.status, 201, cb.text);
    conn.github = cb.body.connection.id;
    const mk = async (body: object) => {
      const r = await call("POST", "/v1/oauth/connections/api_key", body);
      assert.equal(r.status, 201, r.text);
      return r.body.connection.id as string;
    };
    conn.custom = await mk({ provider: "custom_api", api_key: customKey, base_api_url: plain.url });
    for (const [key, fake] of [
      ["trusted", trusted],
      ["untrusted", untrusted],
    ] as const) {
      conn[key] = await mk({
        provider: "custom_api",
        api_key: customKey,
        base_api_url: fake.url,
        access_policy: { allow_all: true },
      });
    }
    conn.s3 = await mk({
      provider: "s3_object_store",
      api_key: `AKIDEXAMPLE:${s3Secret}`,
      base_api_url: s3.url,
      access_policy: { allow_all: true },
    });
    const admin = await call("POST", "/v1/oauth/connections/provision", {
      provider: "sprites_admin",
      access_policy: { sprite_labels: ["ci"], allowed_endpoints: ["/v1/units", "/v1/units/*"] },
    });
    conn.admin = admin.body.connection.id;
  });
  after(async () => {
    await s?.close();
    await oauth?.close();
    await api?.close();
    await s3?.close();
    await plain?.close();
    await trusted?.close();
    await untrusted?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("OAuth: forwards with the connector's token (refreshed first), never the caller's", async () => {
    const before = api.seen.length;
    const [r] = await inUnit("web", [
      {
        path: gwPath("github", "github", "/user/repos?per_page=5&q=a%20b"),
        headers: { authorization: "Bearer caller-token", cookie: "c=1" },
      },
    ]);
    assert.equal(r?.status, 200, r?.text);
    assert.equal(r?.headers["x-provider"], "fake", "the provider's response comes back as is");
    assert.equal(JSON.parse(r?.text ?? "{}").url, "/user/repos?per_page=5&q=a%20b");
    assert.equal(oauth.refreshes, 1, "the expiring token was refreshed");
    const seen = api.seen[before];
    assert.ok(seen);
    const latest = [...oauth.valid].at(-1);
    assert.equal(seen.headers.authorization, `Bearer ${latest}`);
    assert.equal(seen.headers.cookie, undefined);
    assert.equal(seen.headers.accept, "application/vnd.github+json", "the provider's extra headers");
    const c = await call("GET", `/v1/oauth/connections/${conn.github}`);
    assert.ok(Date.parse(c.body.connection.token_expires_at) > Date.now());
  });

  it("streams request bodies to the provider", async () => {
    const before = plain.seen.length;
    const n = 3 * 1024 * 1024 + 17;
    await call("PUT", `/v1/oauth/connections/${conn.custom}`, { access_policy: { allow_all: true } });
    const [r] = await inUnit("web", [
      { path: gwPath("custom_api", "custom", "/upload"), method: "POST", bodyBytes: n },
    ]);
    assert.equal(r?.status, 200, r?.text);
    const seen = plain.seen[before];
    assert.equal(seen?.headers.authorization, `Bearer ${customKey}`);
    assert.equal(seen?.bodyLength, n);
    assert.equal(seen?.bodySha, createHash("sha256").update(Buffer.alloc(n, 7)).digest("hex"));
    assert.equal(seen?.method, "POST");
  });

  it("TLS providers: the certificate is checked (the config's caFile trusted), the credential applied", async () => {
    const from = logs.length;
    const [first, second, refused] = await inUnit("web", [
      { path: gwPath("custom_api", "trusted", "/tls?x=1"), headers: { authorization: "Bearer caller" } },
      { path: gwPath("custom_api", "trusted", "/tls-again"), method: "POST", body: "hello" },
      { path: gwPath("custom_api", "untrusted", "/tls") },
    ]);
    assert.equal(first?.status, 200, first?.text);
    assert.equal(second?.status, 200, second?.text);
    assert.deepEqual(
      trusted.seen.map((x) => [x.method, x.url, x.headers.authorization, x.bodyLength]),
      [
        ["GET", "/tls?x=1", `Bearer ${customKey}`, 0],
        ["POST", "/tls-again", `Bearer ${customKey}`, 5],
      ],
    );
    assert.equal(refused?.status, 502, refused?.text);
    assert.equal(JSON.parse(refused?.text ?? "{}").code, "UMS_PROVIDER_FAILED");
    assert.equal(untrusted.seen.length, 0, "no request went to a provider whose certificate is not trusted");
    const fast = logs.slice(from).filter((l) => l.includes('"msg":"gateway"') && l.includes('"fast":true'));
    assert.equal(fast.length, 2, "both calls went the fast path");
  });

  it("a chunked upload goes Node's way and arrives whole; plain calls on the same connection before it go the fast path", async () => {
    const before = plain.seen.length;
    const from = logs.length;
    const [r1, chunked, r3] = await inUnit("web", [
      { path: gwPath("custom_api", "custom", "/first") },
      {
        path: gwPath("custom_api", "custom", "/chunked"),
        method: "POST",
        headers: { "transfer-encoding": "chunked" },
        bodyBytes: 200_000,
      },
      { path: gwPath("custom_api", "custom", "/after") },
    ]);
    assert.deepEqual([r1?.status, chunked?.status, r3?.status], [200, 200, 200], chunked?.text);
    assert.equal(r1?.socket, r3?.socket, "one kept-alive connection throughout");
    const seen = plain.seen.slice(before);
    assert.deepEqual(
      seen.map((x) => [x.url, x.bodyLength, x.headers.authorization]),
      [
        ["/first", 0, `Bearer ${customKey}`],
        ["/chunked", 200_000, `Bearer ${customKey}`],
        ["/after", 0, `Bearer ${customKey}`],
      ],
    );
    const lines = logs.slice(from).filter((l) => l.includes('"msg":"gateway"'));
    assert.equal(lines.length, 3, lines.join(""));
    assert.ok(lines[0]?.includes('"fast":true'), "the first went the fast path");
    assert.ok(!lines[1]?.includes('"fast":true') && !lines[2]?.includes('"fast":true'), "the rest went Node's way");
  });

  it("policy: empty denies; name_prefix; sprite_labels (403 naming the missing ones)", async () => {
    const set = (p: object) => call("PUT", `/v1/oauth/connections/${conn.custom}`, { access_policy: p });
    const path = gwPath("custom_api", "custom", "/x");
    await set({});
    assert.equal((await inUnit("ci-runner", [{ path }]))[0]?.status, 403);
    await set({ name_prefix: "ci-" });
    assert.equal((await inUnit("ci-runner", [{ path }]))[0]?.status, 200);
    assert.equal((await inUnit("web", [{ path }]))[0]?.status, 403);
    await set({ sprite_labels: ["ci", "eu", "gpu"] });
    const [denied] = await inUnit("ci-runner", [{ path }]);
    assert.equal(denied?.status, 403);
    const body = JSON.parse(denied?.text ?? "{}");
    assert.equal(body.code, "UMS_CONNECTOR_POLICY_DENIED");
    assert.deepEqual(body.missing_labels, ["eu", "gpu"]);
    assert.match(body.error, /'eu', 'gpu'/);
    // Labels given through the units API change the outcome.
    assert.equal((await call("PUT", "/v1/units/ci-runner", { labels: ["ci", "prod", "eu", "gpu"] })).status, 200);
    assert.equal((await inUnit("ci-runner", [{ path }]))[0]?.status, 200);
  });

  it("endpoints: blocked before allowed, and no traversal or encoding trick slips past", async () => {
    await call("PUT", `/v1/oauth/connections/${conn.custom}`, {
      access_policy: {
        allow_all: true,
        allowed_endpoints: ["/api/*", "/admin/public"],
        blocked_endpoints: ["/admin/*"],
      },
    });
    const p = (x: string) => gwPath("custom_api", "custom", x);
    const cases: [string, number][] = [
      ["/api/items", 200],
      ["/api", 403],
      ["/admin/public", 403],
      ["/admin/x", 403],
      ["//admin/x", 403],
      ["/api//../admin/x", 400],
      ["/api/%2e%2e/admin/x", 400],
      ["/api/%2E%2E/admin/x", 400],
      ["/api/.%2e/admin/x", 400],
      ["/api%2f..%2fadmin/x", 400],
      ["/api/%252e%252e/admin", 400],
      ["/api/..%5cadmin", 400],
      ["/ADMIN/x", 403],
      ["/API/items", 403],
      ["/other", 403],
    ];
    const before = plain.seen.length;
    const res = await inUnit(
      "web",
      cases.map(([x]) => ({ path: p(x) })),
    );
    assert.deepEqual(
      res.map((r, i) => [cases[i]?.[0], r.status]),
      cases,
    );
    // Only the allowed call reached the provider, at the normalised path.
    assert.deepEqual(
      plain.seen.slice(before).map((x) => x.url),
      ["/api/items"],
    );
  });

  it("S3: re-signed with SigV4 (verified by the fake), caller's signature dropped", async () => {
    const p = (x: string) => gwPath("s3_object_store", "s3", x);
    const res = await inUnit("web", [
      {
        path: p("/bucket/dir/a%20file.txt"),
        method: "PUT",
        body: "hello s3",
        headers: { "x-amz-date": "19700101T000000Z", authorization: "AWS4-HMAC-SHA256 forged" },
      },
      { path: p("/bucket?list-type=2&prefix=dir%2F"), method: "GET" },
    ]);
    assert.deepEqual(
      res.map((r) => [r.status, r.text]),
      [
        [200, "ok PUT /bucket/dir/a%20file.txt 8"],
        [200, "ok GET /bucket 0"],
      ],
    );
    assert.equal(s3.ok, 2);
    assert.equal(s3.bad, 0);
  });

  it("sprites_admin: the unit manages units through the gateway, within the policy", async () => {
    const p = (x: string) => gwPath("sprites_admin", "admin", x);
    const [list, create, other, tokens] = await inUnit("ci-runner", [
      { path: p("/v1/units") },
      {
        path: p("/v1/units"),
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ name: "made-by-unit" }),
      },
      { path: p("/v1/oauth/connections") },
      { path: p("/v1/units/../oauth/connections") },
    ]);
    assert.equal(list?.status, 200, list?.text);
    assert.deepEqual(
      JSON.parse(list?.text ?? "{}").sprites.map((u: { name: string }) => u.name),
      ["ci-runner", "web"],
    );
    assert.equal(create?.status, 201, create?.text);
    assert.equal(other?.status, 403);
    assert.equal(tokens?.status, 400);
    assert.equal((await inUnit("web", [{ path: p("/v1/units") }]))[0]?.status, 403, "web lacks the 'ci' label");
    assert.equal((await call("GET", "/v1/units/made-by-unit")).status, 200);
    assert.equal((await call("DELETE", "/v1/units/made-by-unit")).status, 204);
  });

  it("a provider not reached: 502 for a 300 KB POST, and the connection carries the next request", async () => {
    // Issue #19 finding 10: the body the 502 came before must not block the kept-alive connection.
    const r = await call("POST", "/v1/oauth/connections/api_key", {
      provider: "custom_api",
      api_key: customKey,
      base_api_url: "http://127.0.0.1:1",
      access_policy: { allow_all: true },
    });
    assert.equal(r.status, 201, r.text);
    const path = `/v1/gateway/custom_api/${r.body.connection.id}/upload`;
    const [post, next] = await inUnit("web", [
      { path, method: "POST", bodyBytes: 300 * 1024, timeoutMs: 10_000 },
      { path, timeoutMs: 10_000 },
    ]);
    assert.equal(post?.status, 502, post?.text);
    assert.equal(next?.status, 502, `the next request got an answer: ${next?.text}`);
    assert.equal(next?.socket, post?.socket, "on the same connection");
  });

  it("raw callers: a stalled body is cut off (408); a call framed two ways never reaches the provider", async () => {
    const before = trusted.seen.length;
    const path = gwPath("custom_api", "trusted", "/raw");
    // Each request on its own connection from inside the unit; prints what came back until the close.
    const raw = async (request: string) => {
      const script = `const net = require("node:net"); const u = new URL(process.argv[1]);
        const s = net.connect(Number(u.port), u.hostname, () => s.write(process.argv[2]));
        let out = ""; s.on("data", (d) => (out += d)); s.on("error", () => {});
        s.on("close", () => { process.stdout.write(out); process.exit(0); });
        setTimeout(() => { process.stdout.write("STILL OPEN " + out); process.exit(0); }, 15000);`;
      const r = await execHttp(s.url, token, "web", ["/.unit/bin/node", "-e", script, gw.web as string, request]);
      assert.equal(r.exitCode, 0, r.stderr.toString());
      return r.stdout.toString();
    };
    const t0 = performance.now();
    const stalled = await raw(`POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n0123456789`);
    assert.match(stalled, /^HTTP\/1\.1 408 /, stalled);
    assert.ok(performance.now() - t0 < 12_000, "cut off after the body idle timeout (2 s), not at the client's end");
    const twoWays = await raw(
      `POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`,
    );
    assert.match(twoWays, /^HTTP\/1\.1 400 /, twoWays);
    assert.deepEqual(
      trusted.seen.slice(before).map((x) => [x.url, x.bodyLength]),
      [],
      "the stalled call was never completed at the provider; the other never reached it",
    );
  });

  it("another organization's connector is not found; unknown paths are 404", async () => {
    const otherToken = await s.token("other-org");
    const c = await call(
      "POST",
      "/v1/oauth/connections/api_key",
      { provider: "custom_api", api_key: "k", base_api_url: api.url, access_policy: { allow_all: true } },
      otherToken,
    );
    const [r, bad] = await inUnit("web", [
      { path: `/v1/gateway/custom_api/${c.body.connection.id}/x` },
      { path: "/v1/other" },
    ]);
    assert.equal(r?.status, 404);
    assert.equal(bad?.status, 404);
  });

  it("ums keys rotate re-encrypts every secret under a new key version while the server runs", async () => {
    const ums = fileURLToPath(new URL("../../../../../bin/ums", import.meta.url));
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("UMS_")));
    const all = async () => {
      const orgs = await s.server.store.orgs.list();
      return (await Promise.all(orgs.map((o) => s.server.store.connectors.list(o.id)))).flat();
    };
    const before = await all();
    assert.ok(before.every((c) => c.keyVersion === 1 && c.secret.startsWith("v1.")));
    const { stdout } = await execFileP(ums, ["keys", "rotate", "--data-dir", s.config.dataDir], { env });
    assert.equal(stdout, `master key version 2; ${before.length} connector secret(s) re-encrypted\n`);
    const after = await all();
    assert.ok(after.every((c) => c.keyVersion === 2 && c.secret.startsWith("v2.")));
    const ring = JSON.parse(await readFile(join(s.config.dataDir, "master.key"), "utf8"));
    assert.deepEqual([ring.current, Object.keys(ring.keys)], [2, ["1", "2"]]);
    assert.equal((await stat(join(s.config.dataDir, "master.key"))).mode & 0o777, 0o600);
    // The running server seals new secrets under the new version, and opens them.
    const fresh = await call("POST", "/v1/oauth/connections/api_key", { provider: "stripe", api_key: "sk_x" });
    assert.equal((await s.server.store.connectors.getById(fresh.body.connection.id))?.keyVersion, 2);
    // The running server reads the new key version when it meets it.
    await call("PUT", `/v1/oauth/connections/${conn.custom}`, { access_policy: { allow_all: true } });
    const res = await inUnit("web", [
      { path: gwPath("github", "github", "/user") },
      { path: gwPath("custom_api", "custom", "/after-rotate") },
      { path: gwPath("s3_object_store", "s3", "/bucket/x") },
    ]);
    assert.deepEqual(
      res.map((r) => r.status),
      [200, 200, 200],
    );
  });

  it("the unit never sees a secret: not in its environment, files or responses", async () => {
    secrets.push(...oauth.issued);
    const tokens = (await call("GET", `/v1/oauth/connections`)).text;
    const responses = await inUnit("ci-runner", [
      { path: gwPath("github", "github", "/user") },
      { path: gwPath("s3_object_store", "s3", "/bucket/x") },
      { path: gwPath("sprites_admin", "admin", "/v1/units") },
    ]);
    const seenByUnit = JSON.stringify(responses);
    // A control: the same grep does find a planted value.
    await execHttp(s.url, token, "ci-runner", ["sh", "-c", "echo canary-4711 > /tmp/canary"]);
    const control = await execHttp(s.url, token, "ci-runner", GREP, { user: "root", stdin: "canary-4711" });
    assert.equal(control.stdout.toString().trim(), "/tmp/canary");
    const env = await execHttp(s.url, token, "ci-runner", [
      "sh",
      "-c",
      "env; cat /proc/1/environ; cat /proc/self/environ",
    ]);
    for (const secret of secrets) {
      const grep = await execHttp(
        s.url,
        token,
        "ci-runner",
        // The secret goes in on stdin: an exec's arguments are in its URL, which the server logs.
        GREP,
        { user: "root", stdin: secret },
      );
      assert.equal(grep.stdout.toString(), "", "a file in the unit holds a secret");
      assert.ok(!env.stdout.toString().includes(secret));
      assert.ok(!seenByUnit.includes(secret));
      assert.ok(!tokens.includes(secret));
      const log = logs.join("");
      const at = log.indexOf(secret);
      assert.ok(
        at < 0,
        `the log holds a secret: ${log.slice(Math.max(0, at - 300), at).replaceAll(secret, "<SECRET>")}`,
      );
    }
    const db = (await readFile(join(s.config.dataDir, "ums.db"))).toString("latin1");
    for (const secret of secrets) assert.ok(!db.includes(secret), "the database file holds a secret in clear");
  });
});
