import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { openWebsocket, readFrames, request, sendText, startUnitApp } from "../../testing/unit-app.js";

const sqlite = testDialects[0];
const header = (headers: [string, string][], name: string) =>
  headers.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);

/** Spec 5 and docs/ARCHITECTURE.md section 10: `<name>-<random>.<unit_host>` reaches the unit, per url_settings. */
describe("unit URL", () => {
  let s: TestServer;
  let admin: string;
  let member: string;
  let stranger: string;
  let host: string;
  let otherHost: string;
  /** A request to the unit URL: sent to the server's loopback address with the unit's Host. */
  const get = (path: string, headers: Record<string, string> = {}, opts: { method?: string; body?: string } = {}) =>
    request(`${s.url}${path}`, { ...opts, headers: { host, ...headers } });
  const settings = async (url_settings: Record<string, string>) =>
    assert.equal((await s.api("PUT", "/v1/units/site", { token: admin, json: { url_settings } })).status, 200);
  const seen = (body: Buffer) => JSON.parse(body.toString()) as { path: string; headers: [string, string][] };

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    admin = await s.token("site-org");
    member = await s.token("site-org", { role: "member" });
    stranger = await s.token("other-org");
    const created = await s.api("POST", "/v1/units", { token: admin, json: { name: "site" } });
    assert.equal(created.status, 201);
    const url = new URL(created.body.url);
    assert.match(url.hostname, /^site-[a-z0-9]{8}\.units\.localhost$/);
    assert.equal(url.port, new URL(s.url).port, "the URL names the port the server listens on");
    host = url.host;
    const other = await s.api("POST", "/v1/units", { token: admin, json: { name: "other" } });
    otherHost = new URL(other.body.url).host;
    await startUnitApp(s.url, admin, "site");
  });
  after(() => s?.close());

  it("public: anyone gets in, path as is, X-Forwarded-* set", async () => {
    await settings({ auth: "public" });
    const r = await get("/some/path?q=1", { "x-app": "1" });
    assert.equal(r.status, 200);
    const unit = seen(r.body);
    assert.equal(unit.path, "/some/path?q=1", "no /v1 prefix");
    assert.deepEqual(header(unit.headers, "x-forwarded-host"), [host]);
    assert.deepEqual(header(unit.headers, "x-forwarded-proto"), ["http"]);
    assert.deepEqual(header(unit.headers, "x-forwarded-for"), ["127.0.0.1"]);
    assert.deepEqual(header(unit.headers, "host"), [host]);
    // Without the port too (a front on port 80/443 sends it so).
    assert.equal((await request(`${s.url}/`, { headers: { host: host.split(":")[0] ?? "" } })).status, 200);
    // The app's own credentials are the app's business; a ums token is not.
    const basic = seen((await get("/", { authorization: "Basic dTpw" })).body);
    assert.deepEqual(header(basic.headers, "authorization"), ["Basic dTpw"]);
    const ums = seen((await get("/", { authorization: `Bearer ${admin}` })).body);
    assert.deepEqual(header(ums.headers, "authorization"), []);
  });

  it("unit: a bearer token of the organization gets in and is not forwarded", async () => {
    await settings({ auth: "unit" });
    const r = await get("/x", { authorization: `Bearer ${member}` });
    assert.equal(r.status, 200);
    assert.deepEqual(header(seen(r.body).headers, "authorization"), []);
  });

  it("unit: no credentials → 401 JSON for API clients; bad or foreign tokens refused", async () => {
    const r = await get("/x", { accept: "application/json" });
    assert.equal(r.status, 401);
    assert.equal(JSON.parse(r.body.toString()).code, "UMS_UNAUTHORIZED");
    assert.match(String(r.headers["www-authenticate"]), /^Bearer realm="ums"/);
    assert.equal((await get("/x", { authorization: "Bearer ums_nope" })).status, 401);
    const foreign = await get("/x", { authorization: `Bearer ${stranger}` });
    assert.equal(foreign.status, 404, "another organization's token does not learn the unit exists");
    assert.equal(JSON.parse(foreign.body.toString()).code, "UMS_UNIT_NOT_FOUND");
    const ws = await openWebsocket(`${s.url}/ws`, { host });
    assert.equal(ws.status, 401);
  });

  it("unit: a browser is sent to the login page, and the session cookie works after it", async () => {
    const first = await get("/page?x=1", { accept: "text/html,application/xhtml+xml" });
    assert.equal(first.status, 302);
    assert.equal(first.headers.location, "/.ums/login?next=%2Fpage%3Fx%3D1");
    const page = await get(first.headers.location ?? "", { accept: "text/html" });
    assert.equal(page.status, 200);
    assert.match(page.body.toString(), /<form method="post" action="\/\.ums\/login">/);
    assert.match(page.body.toString(), /name="next" value="\/page\?x=1"/);
    const form = (token: string, next = "/page?x=1") =>
      get(
        "/.ums/login",
        { "content-type": "application/x-www-form-urlencoded" },
        { method: "POST", body: new URLSearchParams({ token, next }).toString() },
      );
    const bad = await form("ums_wrong");
    assert.equal(bad.status, 401);
    assert.equal(bad.headers["set-cookie"], undefined);
    assert.equal((await form(stranger)).status, 401, "a token of another organization is refused");
    const ok = await form(member);
    assert.equal(ok.status, 303);
    assert.equal(ok.headers.location, "/page?x=1");
    const setCookie = ok.headers["set-cookie"]?.[0] ?? "";
    assert.match(setCookie, /^ums_unit_session=v1\.[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    assert.equal((await form(member, "https://evil.example/")).headers.location, "/", "no open redirect");
    const cookie = setCookie.split(";")[0] ?? "";
    const r = await get("/page?x=1", { cookie: `app=1; ${cookie}`, accept: "text/html" });
    assert.equal(r.status, 200);
    const unit = seen(r.body);
    assert.deepEqual(header(unit.headers, "cookie"), ["app=1"], "the session cookie is stripped, others kept");
    // The cookie is for this unit only.
    const elsewhere = await request(`${s.url}/`, { headers: { host: otherHost, cookie } });
    assert.equal(elsewhere.status, 401);
    // Websockets carry the cookie too.
    const ws = await openWebsocket(`${s.url}/ws`, { host, cookie });
    assert.equal(ws.status, 101);
    const [hello] = await readFrames(ws.socket, 1);
    assert.deepEqual(header(JSON.parse(String(hello)).headers, "cookie"), []);
    sendText(ws.socket, "ping");
    assert.equal(String((await readFrames(ws.socket, 1))[0]), "ping");
    ws.socket.destroy();
    // Logout clears it.
    const out = await get("/.ums/logout", { cookie });
    assert.equal(out.status, 303);
    assert.match(out.headers["set-cookie"]?.[0] ?? "", /^ums_unit_session=; .*Max-Age=0/);
  });

  it("private_access admins: member tokens and their sessions are refused from the next request on", async () => {
    await settings({ auth: "unit", private_access: "organization" });
    const login = await get(
      "/.ums/login",
      { "content-type": "application/x-www-form-urlencoded" },
      { method: "POST", body: new URLSearchParams({ token: member, next: "/" }).toString() },
    );
    const cookie = (login.headers["set-cookie"]?.[0] ?? "").split(";")[0] ?? "";
    assert.equal((await get("/", { cookie })).status, 200);
    await settings({ auth: "unit", private_access: "admins" });
    const r = await get("/", { authorization: `Bearer ${member}` });
    assert.equal(r.status, 403);
    assert.equal(JSON.parse(r.body.toString()).code, "UMS_FORBIDDEN");
    assert.equal((await get("/", { cookie })).status, 403, "an existing session follows the new settings");
    assert.equal((await get("/", { authorization: `Bearer ${admin}` })).status, 200);
    await settings({ auth: "public" });
    assert.equal((await get("/")).status, 200, "public applies at once");
    await settings({ auth: "unit" });
    assert.equal((await get("/")).status, 401, "and so does unit");
  });

  it("a token past its expires_at is refused at the unit URL: bearer, login and the session it made", async () => {
    await settings({ auth: "unit", private_access: "organization" });
    const expiresAt = Date.now() + 1_500;
    const minted = await s.api("POST", "/v1/organizations/site-org/tokens", {
      token: admin,
      json: { description: "short", expires_at: new Date(expiresAt).toISOString() },
    });
    assert.equal(minted.status, 201, minted.text);
    const short = minted.body.token as string;
    const login = (token: string) =>
      get(
        "/.ums/login",
        { "content-type": "application/x-www-form-urlencoded" },
        { method: "POST", body: new URLSearchParams({ token, next: "/" }).toString() },
      );
    assert.equal((await get("/x", { authorization: `Bearer ${short}` })).status, 200);
    const made = await login(short);
    assert.equal(made.status, 303);
    const cookie = (made.headers["set-cookie"]?.[0] ?? "").split(";")[0] ?? "";
    assert.equal((await get("/x", { cookie })).status, 200);
    await new Promise((r) => setTimeout(r, expiresAt - Date.now() + 100));
    const bearer = await get("/x", { authorization: `Bearer ${short}` });
    assert.equal(bearer.status, 401);
    assert.equal(JSON.parse(bearer.body.toString()).code, "UMS_TOKEN_EXPIRED");
    const session = await get("/x", { cookie });
    assert.equal(session.status, 401, "the session of an expired token ends with it");
    const again = await login(short);
    assert.equal(again.status, 401);
    assert.equal(again.headers["set-cookie"], undefined);
    assert.match(again.body.toString(), /That token has expired/);
    assert.equal((await get("/x", { authorization: `Bearer ${member}` })).status, 200, "other tokens keep working");
  });

  it("unknown hosts under the unit host are 404; the API is not reachable there", async () => {
    const r = await request(`${s.url}/`, { headers: { host: "nope-12345678.units.localhost" } });
    assert.equal(r.status, 404);
    assert.equal(JSON.parse(r.body.toString()).code, "UMS_UNIT_NOT_FOUND");
    assert.equal((await request(`${s.url}/`, { headers: { host: "a.b.units.localhost" } })).status, 404);
    // /v1 on a unit host is the unit's own path.
    const api = await get("/v1/units", { authorization: `Bearer ${admin}` });
    assert.equal(seen(api.body).path, "/v1/units");
    // The internal route is not reachable on the API host.
    assert.equal((await request(`${s.url}/.ums/unit-url`)).status, 404);
  });
});
