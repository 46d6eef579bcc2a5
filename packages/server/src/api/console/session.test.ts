import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { request, startUnitApp } from "../../testing/unit-app.js";

/** A signed-in browser, as far as HTTP goes: its cookie and the session's csrf. */
interface Browser {
  readonly cookie: string;
  readonly csrf: string;
  readonly setCookie: string;
}

const header = (headers: [string, string][], name: string) =>
  headers.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);

/** The answer to a websocket upgrade made with `headers`: 101 when it opened (closed at once), else the status. */
function upgrade(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, handshakeTimeout: 20_000 });
    ws.once("open", () => {
      ws.terminate();
      resolve({ status: 101, body: "" });
    });
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on("error", (err) => {
      if (ws.readyState !== ws.OPEN) reject(err);
    });
  });
}

for (const dialect of testDialects) {
  describe(`console sessions (${dialect.name})`, { skip: dialect.skip }, () => {
    let s: TestServer;
    let alice: string;
    let bob: string;
    const origin = () => s.url;

    async function signIn(token: string): Promise<Browser> {
      const r = await s.api("POST", "/v1/console/session", { json: { token }, headers: { origin: origin() } });
      assert.equal(r.status, 200, r.text);
      const setCookie = r.headers.get("set-cookie") ?? "";
      const m = /^ums_console=([^;]+);/.exec(setCookie);
      assert.ok(m?.[1], setCookie);
      return { cookie: `ums_console=${m[1]}`, csrf: r.body.csrf, setCookie };
    }
    /** A request as the console page makes it: the cookie, the csrf on writes, a same-host Origin. */
    const call = (b: Browser, method: string, path: string, json?: unknown, extra: Record<string, string> = {}) =>
      s.api(method, path, {
        headers: { cookie: b.cookie, origin: origin(), ...(method !== "GET" && { "x-ums-csrf": b.csrf }), ...extra },
        ...(json !== undefined && { json }),
      });

    before(async () => {
      // A stand-in for the MCP server: what matters here is who reaches it.
      s = await startTestServer(dialect, { mcp: async (_req, res) => void res.writeHead(200).end("{}") });
      alice = await s.token("alice");
      bob = await s.token("bob");
      await s.unit(alice, "a-unit");
      await s.unit(bob, "b-unit");
    });
    after(() => s?.close());

    it("signs in with a token: an HttpOnly, SameSite=Strict, host-only cookie and the session", async () => {
      const r = await s.api("POST", "/v1/console/session", { json: { token: alice } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.organization, "alice");
      assert.match(r.body.csrf, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(r.body.role, "admin");
      assert.ok(Date.parse(r.body.expires_at) > Date.now());
      assert.equal(r.headers.get("cache-control"), "no-store");
      const cookie = r.headers.get("set-cookie") ?? "";
      assert.match(cookie, /^ums_console=[A-Za-z0-9_-]{43}; /);
      const attrs = cookie.split(";").map((a) => a.trim().toLowerCase());
      assert.ok(attrs.includes("httponly"), cookie);
      assert.ok(attrs.includes("samesite=strict"), cookie);
      assert.ok(attrs.includes("path=/"), cookie);
      assert.ok(!attrs.includes("secure"), "plain http: not Secure (the browser would drop it)");
      assert.ok(!attrs.some((a) => a.startsWith("domain=")), "host-only");
      assert.ok(!cookie.includes(alice) && !r.text.includes(alice), "the token is never echoed");
    });

    it("the cookie authenticates the API; GET /v1/console/session answers the same session", async () => {
      const b = await signIn(alice);
      const me = await call(b, "GET", "/v1/console/session");
      assert.equal(me.status, 200, me.text);
      assert.equal(me.body.organization, "alice");
      assert.equal(me.body.csrf, b.csrf);
      const list = await call(b, "GET", "/v1/units");
      assert.equal(list.status, 200, list.text);
      assert.deepEqual(
        list.body.sprites.map((u: { name: string }) => u.name),
        ["a-unit"],
      );
      // Without the header, a write made with the cookie is refused and changes nothing.
      const refused = await s.api("POST", "/v1/units", {
        headers: { cookie: b.cookie, origin: origin() },
        json: { name: "no-csrf" },
      });
      assert.equal(refused.status, 403, refused.text);
      assert.equal(refused.body.code, "UMS_FORBIDDEN");
      assert.match(refused.body.error, /X-UMS-CSRF/);
      const wrong = await call(b, "POST", "/v1/units", { name: "no-csrf" }, { "x-ums-csrf": `${b.csrf.slice(1)}x` });
      assert.equal(wrong.status, 403);
      const other = await signIn(alice);
      const crossed = await call(b, "POST", "/v1/units", { name: "no-csrf" }, { "x-ums-csrf": other.csrf });
      assert.equal(crossed.status, 403, "another session's csrf is not this one's");
      assert.equal((await s.api("GET", "/v1/units/no-csrf", { token: alice })).status, 404, "nothing was made");
      // With it, the write goes through (and is audited as the token's).
      const made = await call(b, "POST", "/v1/units", { name: "by-console" });
      assert.equal(made.status, 201, made.text);
      assert.equal((await call(b, "DELETE", "/v1/units/by-console")).status, 204);
      // A foreign Origin is refused even on reads (a browser would not send the cookie; anything else is not a page of ours).
      const foreign = await call(b, "GET", "/v1/units", undefined, { origin: "https://evil.example" });
      assert.equal(foreign.status, 403, foreign.text);
      const nullOrigin = await call(b, "GET", "/v1/units", undefined, { origin: "null" });
      assert.equal(nullOrigin.status, 403);
      const audit = await s.api("GET", "/v1/organizations/alice/audit", { token: alice });
      assert.equal(audit.status, 200, audit.text);
      const routes = audit.body.events.map((e: { method: string; route: string }) => `${e.method} ${e.route}`);
      assert.ok(routes.includes("POST /v1/console/session"), routes.join(", "));
      assert.ok(routes.includes("POST /v1/units"), routes.join(", "));
    });

    it("another organization's session sees nothing of alice's", async () => {
      const b = await signIn(bob);
      assert.equal((await call(b, "GET", "/v1/units/a-unit")).status, 404);
      assert.equal((await call(b, "DELETE", "/v1/units/a-unit")).status, 404);
      assert.equal((await call(b, "GET", "/v1/organizations/alice/audit")).status, 404);
      const list = await call(b, "GET", "/v1/units");
      assert.deepEqual(
        list.body.sprites.map((u: { name: string }) => u.name),
        ["b-unit"],
      );
      assert.equal((await s.api("GET", "/v1/units/a-unit", { token: alice })).status, 200, "still there");
    });

    it("signing out deletes the session: the cookie no longer works", async () => {
      const b = await signIn(alice);
      const noCsrf = await s.api("DELETE", "/v1/console/session", { headers: { cookie: b.cookie } });
      assert.equal(noCsrf.status, 403, "sign-out is a write: it needs the csrf");
      const out = await call(b, "DELETE", "/v1/console/session");
      assert.equal(out.status, 204, out.text);
      assert.match(out.headers.get("set-cookie") ?? "", /^ums_console=; Path=\/; Max-Age=0; HttpOnly; SameSite=Strict/);
      for (const path of ["/v1/console/session", "/v1/units"]) {
        const r = await call(b, "GET", path);
        assert.equal(r.status, 401, `${path}: ${r.text}`);
        assert.equal(r.body.code, "UMS_UNAUTHORIZED");
      }
      assert.equal((await call(b, "DELETE", "/v1/console/session")).status, 401);
    });

    it("revoking the token ends its sessions at once", async () => {
      const minted = await s.api("POST", "/v1/organizations/alice/tokens", {
        token: alice,
        json: { description: "browser" },
      });
      assert.equal(minted.status, 201, minted.text);
      const b = await signIn(minted.body.token);
      assert.equal((await call(b, "GET", "/v1/units")).status, 200);
      const revoked = await s.api("DELETE", `/v1/organizations/alice/tokens/${minted.body.id}`, { token: alice });
      assert.equal(revoked.status, 204, revoked.text);
      assert.equal((await call(b, "GET", "/v1/units")).status, 401);
      assert.equal((await call(b, "GET", "/v1/console/session")).status, 401);
      const again = await s.api("POST", "/v1/console/session", { json: { token: minted.body.token } });
      assert.equal(again.status, 401, "a revoked token cannot sign in");
    });

    it("a token past its expires_at cannot sign in, and its session ends when it expires", async () => {
      const expiresAt = Date.now() + 1_500;
      const minted = await s.api("POST", "/v1/organizations/alice/tokens", {
        token: alice,
        json: { description: "short", expires_at: new Date(expiresAt).toISOString() },
      });
      assert.equal(minted.status, 201, minted.text);
      const b = await signIn(minted.body.token);
      assert.equal((await call(b, "GET", "/v1/units")).status, 200);
      await new Promise((r) => setTimeout(r, expiresAt - Date.now() + 100));
      assert.equal((await call(b, "GET", "/v1/units")).status, 401, "the session outlived its token");
      const again = await s.api("POST", "/v1/console/session", { json: { token: minted.body.token } });
      assert.equal(again.status, 401, again.text);
      assert.equal(again.body.code, "UMS_TOKEN_EXPIRED");
      assert.equal(again.headers.get("set-cookie"), null);
    });

    it("refuses bad sign-ins with 400/401/403, never 500, and sets no cookie", async () => {
      const cases: [unknown, number][] = [
        [undefined, 400],
        [{}, 400],
        [{ token: "" }, 400],
        [{ token: 5 }, 400],
        [{ token: "x".repeat(10_000) }, 400],
        [{ token: alice, extra: 1 }, 400],
        [[alice], 400],
        [{ token: "ums_notarealtoken" }, 401],
        [{ token: `${alice}x` }, 401],
      ];
      for (const [json, status] of cases) {
        const r = await s.api("POST", "/v1/console/session", { ...(json !== undefined && { json }) });
        assert.equal(r.status, status, `${JSON.stringify(json)?.slice(0, 40)}: ${r.text}`);
        assert.equal(r.headers.get("set-cookie"), null);
      }
      const bad = await s.api("POST", "/v1/console/session", {
        body: "{not json",
        headers: { "content-type": "application/json" },
      });
      assert.equal(bad.status, 400);
      const form = await s.api("POST", "/v1/console/session", {
        body: `token=${alice}`,
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
      assert.equal(form.status, 415, "a cross-site form cannot sign a browser in");
      const text = await s.api("POST", "/v1/console/session", {
        body: JSON.stringify({ token: alice }),
        headers: { "content-type": "text/plain" },
      });
      assert.equal(text.status, 415);
      const foreign = await s.api("POST", "/v1/console/session", {
        json: { token: alice },
        headers: { origin: "https://evil.example" },
      });
      assert.equal(foreign.status, 403, foreign.text);
      assert.equal(foreign.headers.get("set-cookie"), null);
      // Cookies that are not sessions: 401, whatever their shape.
      for (const cookie of ["ums_console=", "ums_console=abc", `ums_console=${"A".repeat(43)}`, "ums_console=%00;"]) {
        const r = await s.api("GET", "/v1/units", { headers: { cookie } });
        assert.equal(r.status, 401, cookie);
      }
      // A bearer token wins over a cookie; the session routes need the cookie.
      assert.equal((await s.api("GET", "/v1/console/session", { token: alice })).status, 401);
    });

    it("a websocket opened with the cookie needs an Origin of this host", async () => {
      const b = await signIn(alice);
      const ws = `${s.url.replace(/^http/, "ws")}/v1/units/a-unit/exec?cmd=true`;
      const none = await upgrade(ws, { cookie: b.cookie });
      assert.equal(none.status, 403, none.body);
      const foreign = await upgrade(ws, { cookie: b.cookie, origin: "http://evil.example" });
      assert.equal(foreign.status, 403, foreign.body);
      const otherPort = new URL(s.url);
      otherPort.port = String(Number(otherPort.port) + 1);
      assert.equal((await upgrade(ws, { cookie: b.cookie, origin: otherPort.origin })).status, 403, "another port");
      const ok = await upgrade(ws, { cookie: b.cookie, origin: origin() });
      assert.equal(ok.status, 101, ok.body);
      // A bearer token's websockets are not browsers': no Origin needed.
      assert.equal((await upgrade(ws, { authorization: `Bearer ${alice}` })).status, 101);
    });

    it("the unit proxy and /v1/mcp never take the cookie; the proxy strips it", async () => {
      const b = await signIn(alice);
      await startUnitApp(s.url, alice, "a-unit");
      const base = `${s.url}/v1/units/a-unit`;
      const byCookie = await request(`${base}/page`, { headers: { cookie: b.cookie, origin: origin() } });
      assert.equal(byCookie.status, 401, byCookie.body.toString());
      const tunnel = await upgrade(`${base.replace(/^http/, "ws")}/proxy`, { cookie: b.cookie, origin: origin() });
      assert.equal(tunnel.status, 401, tunnel.body);
      const mcp = await s.api("POST", "/v1/mcp", {
        headers: { cookie: b.cookie, origin: origin(), "x-ums-csrf": b.csrf },
        json: { jsonrpc: "2.0", id: 1, method: "tools/list" },
      });
      assert.equal(mcp.status, 401, mcp.text);
      const mcpBearer = await s.api("POST", "/v1/mcp", { token: alice, json: { jsonrpc: "2.0", id: 1 } });
      assert.equal(mcpBearer.status, 200, "the same call with the token reaches it");
      const r = await request(`${base}/page`, {
        headers: { authorization: `Bearer ${alice}`, cookie: `a=1; ${b.cookie}; b=2` },
      });
      assert.equal(r.status, 200, r.body.toString());
      const seen = JSON.parse(r.body.toString());
      assert.deepEqual(header(seen.headers, "cookie"), ["a=1; b=2"], "the unit never sees ums_console");
      const only = await request(`${base}/page`, { headers: { authorization: `Bearer ${alice}`, cookie: b.cookie } });
      assert.deepEqual(header(JSON.parse(only.body.toString()).headers, "cookie"), []);
    });
  });
}
