import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { testDialects } from "../testing/dialects.js";
import { execHttp } from "../testing/exec-client.js";
import {
  type FakeOAuth,
  fakeBearerApi,
  fakeGithub,
  fakeOAuth,
  writeConnectorsConfig,
} from "../testing/fake-providers.js";
import { GATEWAY_CLIENT } from "../testing/gateway-client.js";
import { type ApiResponse, startTestServer, type TestServer } from "../testing/server.js";
import { openWebsocket, request, startUnitApp } from "../testing/unit-app.js";

// Issue 19, "cross-organization access on every route": organizations A and B; B has a unit named like
// A's ("shared") and one A lacks ("bonly"), with files, services, checkpoints, policies, labels, exec
// sessions, a unit URL and connectors. Every route of the OpenAPI document (GET /v1/openapi.json, made
// from the route schemas) is called with A's token against B's things: a unit A lacks answers 404 and
// a unit of the same name is A's own; no answer carries B's data, and nothing of B changes. Websocket
// routes are tried with an upgrade too; then the unit URL, the proxy, the connectors and the connector
// gateway (from inside A's unit). A route that is neither exercised here nor listed as organization-
// less fails the test, so a new route is covered when it is added.

const sqlite = testDialects[0];
const rand = () => randomBytes(8).toString("hex");
const B_SECRET = `b-secret-${rand()}`;
const B_LABEL = `b-label-${rand()}`;
const B_SERVICE_MARK = `b-service-${rand()}`;
const B_SESSION_MARK = `b-session-${rand()}`;
const B_FILE = "/home/unit/b-secret.txt";
const TIMEOUT_MS = 120_000;

type Answer = Pick<ApiResponse, "status" | "text" | "body">;

/** What a route is called with: its JSON body, query string, or raw body (every one valid, so that only the unit decides). */
interface Example {
  json?: unknown;
  query?: string;
  body?: string;
}

/** The identifiers in a call against B: the unit's name and the ids of things of B. */
interface Target {
  name: string;
  checkpoint: string;
  session: string;
  service: string;
  conn: string;
}

/** A valid request for every route that names a unit or a connector (keys: "METHOD openapi-path"). */
const EXAMPLES: Record<string, (t: Target) => Example> = {
  "GET /v1/units/{name}": () => ({}),
  "PUT /v1/units/{name}": () => ({ json: { labels: ["a-label"], url_settings: { auth: "public" } } }),
  "DELETE /v1/units/{name}": () => ({}),
  "GET /v1/units/{name}/check": () => ({}),
  "POST /v1/units/{name}/upgrade": () => ({ json: { version: "latest" } }),
  "GET /v1/units/{name}/policy/resources": () => ({}),
  "POST /v1/units/{name}/policy/resources": () => ({ json: { memory: { limit_mb: 200 }, pids: { limit: 100 } } }),
  "DELETE /v1/units/{name}/policy/resources": () => ({}),
  "GET /v1/units/{name}/policy/privileges": () => ({}),
  "POST /v1/units/{name}/policy/privileges": () => ({ json: { profile: "minimal" } }),
  "DELETE /v1/units/{name}/policy/privileges": () => ({}),
  "GET /v1/units/{name}/policy/network": () => ({}),
  "POST /v1/units/{name}/policy/network": () => ({ json: { rules: [] } }),
  "GET /v1/units/{name}/policy/network/log": () => ({}),
  "POST /v1/units/{name}/checkpoint": () => ({ json: { comment: "a's" } }),
  "GET /v1/units/{name}/checkpoints": () => ({}),
  "GET /v1/units/{name}/checkpoints/{id}": () => ({}),
  "DELETE /v1/units/{name}/checkpoints/{id}": () => ({}),
  "POST /v1/units/{name}/checkpoints/{id}/restore": () => ({ json: {} }),
  "POST /v1/units/{name}/exec": () => ({ query: `cmd=cat&cmd=${encodeURIComponent(B_FILE)}` }),
  "GET /v1/units/{name}/exec": () => ({ query: "cmd=true" }),
  "GET /v1/units/{name}/exec/{id}": () => ({}),
  "POST /v1/units/{name}/exec/{id}/kill": () => ({ query: "signal=KILL&timeout=1" }),
  "GET /v1/units/{name}/fs/list": () => ({ query: "path=/home/unit&workingDir=/" }),
  "GET /v1/units/{name}/fs/read": () => ({ query: `path=${encodeURIComponent(B_FILE)}&workingDir=/` }),
  "POST /v1/units/{name}/fs/chmod": () => ({ json: { path: B_FILE, workingDir: "/", mode: "0600" } }),
  "POST /v1/units/{name}/fs/chown": () => ({ json: { path: B_FILE, workingDir: "/", uid: 0, asRoot: true } }),
  "POST /v1/units/{name}/fs/copy": () => ({ json: { source: B_FILE, dest: "/tmp/copied", workingDir: "/" } }),
  "POST /v1/units/{name}/fs/rename": () => ({ json: { source: B_FILE, dest: "/tmp/moved", workingDir: "/" } }),
  "DELETE /v1/units/{name}/fs/delete": () => ({ json: { path: B_FILE, workingDir: "/" } }),
  "GET /v1/units/{name}/fs/watch": () => ({}),
  "PUT /v1/units/{name}/fs/write": () => ({ query: `path=${encodeURIComponent(B_FILE)}&workingDir=/`, body: "a's" }),
  "GET /v1/units/{name}/services": () => ({}),
  "GET /v1/units/{name}/services/{service}": () => ({}),
  "PUT /v1/units/{name}/services/{service}": () => ({
    query: "duration=0",
    json: { cmd: "sleep", args: ["1000"] },
  }),
  "DELETE /v1/units/{name}/services/{service}": () => ({}),
  "POST /v1/units/{name}/services/{service}/start": () => ({ query: "duration=0" }),
  "POST /v1/units/{name}/services/{service}/stop": () => ({ query: "duration=0" }),
  "POST /v1/units/{name}/services/{service}/restart": () => ({ query: "duration=0" }),
  "GET /v1/units/{name}/services/{service}/logs": () => ({}),
  "POST /v1/units/{name}/services/signal": (t) => ({ json: { name: t.service, signal: "KILL" } }),
  // The proxy to the unit's HTTP target (spec 5), every method.
  ...Object.fromEntries(
    ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"].map((m) => [
      `${m} /v1/units/{name}/{*}`,
      () => ({ ...(m !== "GET" && m !== "HEAD" && m !== "OPTIONS" && { body: "a's" }) }),
    ]),
  ),
  "GET /v1/oauth/connections/{id}": () => ({}),
  "PUT /v1/oauth/connections/{id}": () => ({ json: { access_policy: { allow_all: true } } }),
  "PATCH /v1/oauth/connections/{id}": () => ({ json: { access_policy: { allow_all: true } } }),
  "DELETE /v1/oauth/connections/{id}": () => ({}),
};

/** Routes that name no unit or connector: what A gets is A's by construction; each is checked in "organization-level routes". */
const ORG_LEVEL = new Set([
  "GET /v1/units",
  "POST /v1/units",
  "GET /v1/organization",
  "GET /v1/oauth/providers",
  "GET /v1/oauth/connections",
  "POST /v1/oauth/connections/api_key",
  "POST /v1/oauth/connections/provision",
  "GET /v1/oauth/{provider}/authorize",
  "POST /v1/oauth/{provider}/callback",
]);

/** The concrete path of an OpenAPI path for a target. */
function fill(path: string, t: Target): string {
  const idOf = path.includes("/checkpoints/") ? t.checkpoint : path.includes("/exec/") ? t.session : t.conn;
  return path
    .replace("{name}", encodeURIComponent(t.name))
    .replace("{id}", encodeURIComponent(idOf))
    .replace("{service}", encodeURIComponent(t.service))
    .replace("{provider}", "github")
    .replace("{*}", "cross/org");
}

describe("cross-organization access on every route", { timeout: 15 * 60_000 }, () => {
  let s: TestServer;
  let tA: string;
  let tB: string;
  let oauth: FakeOAuth;
  let api: Awaited<ReturnType<typeof fakeBearerApi>>;
  let dir: string;
  let ops: [string, string][] = [];
  const id: Record<string, string> = {};
  const b = {
    checkpoint: "",
    sharedCheckpoint: "",
    session: "",
    sharedSession: "",
    conn: "",
    adminConn: "",
    state: "",
  };
  let bHost = "";
  let aHost = "";
  let aAdminConn = "";
  let aGateway = "";
  /** What must never appear in an answer to A (unless A's own request carried it). */
  const markers = () =>
    [B_SECRET, B_LABEL, B_SERVICE_MARK, B_SESSION_MARK, id.bShared, id.bOnly, b.conn, b.adminConn, bHost].filter(
      (x): x is string => !!x,
    );

  const call = (token: string | undefined, method: string, path: string, ex: Example = {}): Promise<Answer> =>
    s.api(method, `${path}${ex.query ? `${path.includes("?") ? "&" : "?"}${ex.query}` : ""}`, {
      token,
      json: ex.json,
      body: ex.body,
      ...(ex.json === undefined &&
        ex.body !== undefined && { headers: { "content-type": "application/octet-stream" } }),
      redirect: "manual",
      timeoutMs: TIMEOUT_MS,
    });
  const asB = (method: string, path: string, ex: Example = {}) => call(tB, method, path, ex);
  const ok = async (p: Promise<Answer>, what: string, status = [200, 201, 204]) => {
    const r = await p;
    assert.ok(status.includes(r.status), `${what}: ${r.status} ${r.text.slice(0, 300)}`);
    return r;
  };
  /** No marker of B in an answer to A, unless A's request itself named it. */
  const noLeak = (label: string, sent: string, text: string) => {
    for (const m of markers()) {
      if (!sent.includes(m)) assert.ok(!text.includes(m), `${label}: the answer carries B's ${m}`);
    }
  };

  /** Everything of B that A's calls could change, as B sees it (fields that change by themselves left out). */
  const snapshotB = async () => {
    const units = (await asB("GET", "/v1/units")).body.sprites as { id: string; name: string; labels?: string[] }[];
    const out: Record<string, unknown> = {
      units: units
        .map((u) => ({ ...u, status: undefined, updated_at: undefined, last_active_at: undefined }))
        .sort((x, y) => x.name.localeCompare(y.name)),
      connections: (await asB("GET", "/v1/oauth/connections")).body,
    };
    for (const name of ["shared", "bonly"]) {
      const get = async (p: string) => (await asB("GET", `/v1/units/${name}${p}`)).body;
      const services = (await get("/services")) as { name: string; definition?: unknown }[];
      out[name] = {
        file: (await asB("GET", `/v1/units/${name}/fs/read?path=${B_FILE}&workingDir=/`)).text,
        mode: (await asB("GET", `/v1/units/${name}/fs/list?path=${B_FILE}&workingDir=/`)).body.entries,
        // Not the pid: the idle sweep may stop B's unit meanwhile, and its next use boots it again.
        services: services.map((x) => ({ name: x.name, definition: x.definition })),
        checkpoints: ((await get("/checkpoints")) as { id: string }[]).map((c) => c.id),
        resources: await get("/policy/resources"),
        privileges: await get("/policy/privileges"),
        network: await get("/policy/network"),
        sessions: ((await get("/exec")) as { id: number }[]).map((x) => x.id).sort(),
      };
    }
    return out;
  };
  let before0: Record<string, unknown> = {};

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    oauth = await fakeOAuth();
    api = await fakeBearerApi();
    dir = await mkdtemp(join(tmpdir(), "ums-xorg-"));
    const cfg = await writeConnectorsConfig(dir, {
      allowPrivateBaseUrls: true,
      providers: { github: fakeGithub(oauth, api) },
    });
    s = await startTestServer(sqlite, { connectorsConfig: cfg });
    tA = await s.token("alpha");
    tB = await s.token("beta");
    const doc = (await s.api("GET", "/v1/openapi.json")).body as { paths: Record<string, Record<string, unknown>> };
    ops = Object.entries(doc.paths).flatMap(([p, o]) =>
      Object.keys(o).map((m) => [m.toUpperCase(), p] as [string, string]),
    );

    // A: "shared". B: "shared" and "bonly", with something of everything.
    id.aShared = (await ok(call(tA, "POST", "/v1/units", { json: { name: "shared" } }), "A creates shared")).body.id;
    for (const name of ["shared", "bonly"]) {
      const u = await ok(
        asB("POST", "/v1/units", { json: { name, labels: [B_LABEL], url_settings: { auth: "unit" } } }),
        name,
      );
      id[name === "shared" ? "bShared" : "bOnly"] = u.body.id;
      if (name === "bonly") bHost = new URL(u.body.url).host;
      await ok(asB("PUT", `/v1/units/${name}/fs/write?path=${B_FILE}&workingDir=/`, { body: B_SECRET }), "B's file");
      await ok(
        asB("PUT", `/v1/units/${name}/services/bsvc?duration=0`, {
          json: { cmd: "sleep", args: ["1000", B_SERVICE_MARK] },
        }),
        "B's service",
      );
      await ok(
        asB("POST", `/v1/units/${name}/policy/resources`, { json: { memory: { limit_mb: 300 } } }),
        "B's policy",
      );
      const cp = await ok(asB("POST", `/v1/units/${name}/checkpoint`, { json: { comment: "b's" } }), "B's checkpoint");
      const done = cp.text
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l))
        .at(-1);
      const cpId = String(done.id ?? done.checkpoint?.id ?? done.checkpoint_id ?? "");
      assert.ok(cpId, `checkpoint id in ${cp.text}`);
      // A session that outlives its client (max_run_after_disconnect), printing B's mark.
      const q = new URLSearchParams({ max_run_after_disconnect: "10m" });
      for (const c of ["sh", "-c", `echo ${B_SESSION_MARK}; sleep 1000`]) q.append("cmd", c);
      const ws = await openWebsocket(`${s.url}/v1/units/${name}/exec?${q}`, { authorization: `Bearer ${tB}` });
      assert.equal(ws.status, 101, "B's session");
      // Leave once the session is under way (its first frame), as a client that went away would.
      await new Promise((r) => ws.socket.once("data", r));
      ws.socket.destroy();
      await startUnitApp(s.url, tB, name);
      if (name === "bonly") b.checkpoint = cpId;
      else b.sharedCheckpoint = cpId;
    }
    const sessions = (name: string) => asB("GET", `/v1/units/${name}/exec`);
    b.session = String((await sessions("bonly")).body.at(-1)?.id ?? "");
    b.sharedSession = String((await sessions("shared")).body.at(-1)?.id ?? "");
    assert.ok(b.session && b.sharedSession, "B's sessions are listed");
    b.conn = (
      await ok(
        asB("POST", "/v1/oauth/connections/api_key", {
          json: {
            provider: "custom_api",
            api_key: `b-key-${rand()}`,
            base_api_url: api.url,
            access_policy: { allow_all: true },
          },
        }),
        "B's connector",
      )
    ).body.connection.id;
    b.adminConn = (
      await ok(
        asB("POST", "/v1/oauth/connections/provision", {
          json: { provider: "sprites_admin", access_policy: { allow_all: true } },
        }),
        "B's admin connector",
      )
    ).body.connection.id;
    b.state = (
      await ok(asB("GET", "/v1/oauth/github/authorize?redirect_uri=https://app.example/cb"), "B's authorize")
    ).body.state;
    // A's own: a unit URL session, an admin connector, the gateway client in its unit.
    aHost = new URL((await call(tA, "GET", "/v1/units/shared")).body.url).host;
    aAdminConn = (
      await ok(
        call(tA, "POST", "/v1/oauth/connections/provision", {
          json: { provider: "sprites_admin", access_policy: { allow_all: true } },
        }),
        "A's admin connector",
      )
    ).body.connection.id;
    const w = await execHttp(s.url, tA, "shared", ["sh", "-c", "cat > /tmp/gw.mjs"], { stdin: GATEWAY_CLIENT });
    assert.equal(w.exitCode, 0, w.stderr.toString());
    const net = JSON.parse(await readFile(join(s.config.dataDir, "run", id.aShared as string, "network.json"), "utf8"));
    aGateway = `http://${net.hostIp}:${s.server.gatewayPort}`;
    before0 = await snapshotB();
  });
  after(async () => {
    await s?.close();
    await oauth?.close();
    await api?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("every route of the OpenAPI document is exercised here or listed as organization-level", () => {
    assert.ok(ops.length > 40, `${ops.length} routes`);
    const missing = ops.map(([m, p]) => `${m} ${p}`).filter((k) => !(k in EXAMPLES) && !ORG_LEVEL.has(k));
    assert.deepEqual(missing, [], "add a cross-organization case (EXAMPLES) or list the route in ORG_LEVEL");
    const stale = [...Object.keys(EXAMPLES), ...ORG_LEVEL].filter((k) => !ops.some(([m, p]) => `${m} ${p}` === k));
    assert.deepEqual(stale, [], "cases for routes the document no longer has");
  });

  it("a unit A lacks (B's 'bonly', or B's unit id): 404 on every unit route, websockets too", async () => {
    const failures: string[] = [];
    const targets: Target[] = [
      { name: "bonly", checkpoint: b.checkpoint, session: b.session, service: "bsvc", conn: b.conn },
      { name: id.bOnly as string, checkpoint: b.checkpoint, session: b.session, service: "bsvc", conn: b.conn },
    ];
    for (const t of targets) {
      for (const [m, p] of ops) {
        const key = `${m} ${p}`;
        if (!p.startsWith("/v1/units/{name}")) continue;
        const ex = (EXAMPLES[key] as (t: Target) => Example)(t);
        const path = fill(p, t);
        const label = `A: ${m} ${path}`;
        const r = await call(tA, m, path, ex);
        noLeak(label, path + JSON.stringify(ex), r.text);
        // The exec attach refuses a plain GET (it is a websocket) before it looks the unit up: that
        // says nothing of B. (The file watch looks the unit up first.)
        const wsOnly = r.status === 400 && /websocket/.test(r.text) && key === "GET /v1/units/{name}/exec/{id}";
        if (!wsOnly && (r.status !== 404 || (m !== "HEAD" && r.body?.code !== ErrorCode.UnitNotFound))) {
          failures.push(`${label}: ${r.status} ${r.text.slice(0, 200)}`);
        }
        // Websockets: the exec start and attach, the file watch, the proxy.
        if (m === "GET" && /\/exec$|\/exec\/\{id\}$|\/fs\/watch$|\{\*\}$/.test(p)) {
          const q = p.endsWith("/exec") ? "?cmd=true" : "";
          const ws = await openWebsocket(`${s.url}${path}${q}`, { authorization: `Bearer ${tA}` });
          ws.socket.destroy();
          if (ws.status !== 404) failures.push(`${label} (websocket): ${ws.status}`);
        }
      }
    }
    assert.deepEqual(failures, []);
  });

  it("a unit of the same name is A's own: B's checkpoints, sessions, services, files and app stay out of reach", async () => {
    const t: Target = {
      name: "shared",
      checkpoint: b.sharedCheckpoint,
      session: b.sharedSession,
      service: "bsvc",
      conn: b.conn,
    };
    const failures: string[] = [];
    for (const [m, p] of ops) {
      const key = `${m} ${p}`;
      // A deletes its own unit last (below); B's is untouched either way.
      if (!p.startsWith("/v1/units/{name}") || key === "DELETE /v1/units/{name}") continue;
      const ex = (EXAMPLES[key] as (t: Target) => Example)(t);
      const path = fill(p, t);
      const label = `A: ${m} ${path}`;
      // Checkpoint and session ids count per unit ("v2", 3): A's unit may have its own of the same id.
      const aHas = p.includes("/checkpoints/{id}")
        ? ((await call(tA, "GET", "/v1/units/shared/checkpoints")).body as { id: string }[]).some(
            (c) => c.id === t.checkpoint,
          )
        : p.includes("/exec/{id}/kill")
          ? ((await call(tA, "GET", "/v1/units/shared/exec")).body as { id: number }[]).some(
              (x) => String(x.id) === t.session,
            )
          : true;
      const r = await call(tA, m, path, ex);
      try {
        assert.ok(r.status < 500 || [502, 504].includes(r.status), `${label}: ${r.status} ${r.text.slice(0, 200)}`);
        noLeak(label, path + JSON.stringify(ex), r.text);
        // Things of B named by id are not found in A's unit.
        if (!aHas) assert.equal(r.status, 404, `${label}: ${r.text.slice(0, 200)}`);
        if (key === "GET /v1/units/{name}") assert.equal(r.body.id, id.aShared, label);
        // A's unit runs no app: the proxy never answers from B's.
        if (p.endsWith("{*}")) assert.notEqual(r.status, 200, `${label}: ${r.text.slice(0, 200)}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
    // Attaching to B's session number in A's unit never shows B's session.
    const ws = await openWebsocket(`${s.url}/v1/units/shared/exec/${b.sharedSession}`, {
      authorization: `Bearer ${tA}`,
    });
    const seen: Buffer[] = [];
    ws.socket.on("data", (d: Buffer) => seen.push(d));
    await new Promise((r) => setTimeout(r, 500));
    ws.socket.destroy();
    assert.ok(!Buffer.concat(seen).toString("latin1").includes(B_SESSION_MARK), "A attached to B's session");
    assert.deepEqual(failures, []);
  });

  it("the unit URL of B's unit refuses A's token and A's session; the proxy path answers 404", async () => {
    const get = (host: string, headers: Record<string, string> = {}, opts: { method?: string; body?: string } = {}) =>
      request(`${s.url}/cross/org`, { ...opts, headers: { host, ...headers } });
    // Positive control: B's token reaches B's app.
    assert.equal((await get(bHost, { authorization: `Bearer ${tB}` })).status, 200);
    const bearer = await get(bHost, { authorization: `Bearer ${tA}`, accept: "application/json" });
    assert.equal(bearer.status, 404);
    assert.equal(JSON.parse(bearer.body.toString()).code, ErrorCode.UnitNotFound);
    // A logs in at its own unit URL; its session cookie is worth nothing at B's.
    const login = await request(`${s.url}/.ums/login`, {
      method: "POST",
      headers: { host: aHost, "content-type": "application/x-www-form-urlencoded" },
      body: `token=${encodeURIComponent(tA)}&next=/`,
    });
    assert.equal(login.status, 303);
    const cookie = String(login.headers["set-cookie"]).split(";")[0] ?? "";
    assert.ok(cookie.includes("="), "A has a session");
    const replay = await get(bHost, { cookie, accept: "application/json" });
    assert.equal(replay.status, 401);
    // Logging in at B's unit URL with A's token: refused, no cookie.
    const foreignLogin = await request(`${s.url}/.ums/login`, {
      method: "POST",
      headers: { host: bHost, "content-type": "application/x-www-form-urlencoded" },
      body: `token=${encodeURIComponent(tA)}&next=/`,
    });
    assert.equal(foreignLogin.status, 401);
    assert.equal(foreignLogin.headers["set-cookie"], undefined);
    const ws = await openWebsocket(`${s.url}/ws`, { host: bHost, authorization: `Bearer ${tA}` });
    ws.socket.destroy();
    assert.equal(ws.status, 404);
    for (const r of [bearer, replay, foreignLogin]) noLeak("unit URL", bHost, r.body.toString());
  });

  it("connectors: B's connectors and OAuth state are not A's, at the API and at the gateway from A's unit", async () => {
    for (const m of ["GET", "PUT", "PATCH", "DELETE"]) {
      const key = `${m} /v1/oauth/connections/{id}`;
      for (const conn of [b.conn, b.adminConn]) {
        const ex = (EXAMPLES[key] as (t: Target) => Example)({} as Target);
        const r = await call(tA, m, `/v1/oauth/connections/${conn}`, ex);
        assert.equal(r.status, 404, `${key}: ${r.text}`);
        assert.equal(r.body.code, ErrorCode.ConnectionNotFound);
      }
    }
    // From inside A's unit: B's connectors through the gateway, and A's admin connector aimed at B's unit.
    const seen0 = api.seen.length;
    const reqs = [
      { path: `/v1/gateway/custom_api/${b.conn}/anything` },
      { path: `/v1/gateway/sprites_admin/${b.adminConn}/v1/units` },
      { path: `/v1/gateway/sprites_admin/${aAdminConn}/v1/units/bonly` },
      { path: `/v1/gateway/sprites_admin/${aAdminConn}/v1/units/bonly/fs/read?path=${B_FILE}&workingDir=/` },
      { path: `/v1/gateway/sprites_admin/${aAdminConn}/v1/units` },
    ];
    const r = await execHttp(s.url, tA, "shared", ["/.unit/bin/node", "/tmp/gw.mjs", aGateway, JSON.stringify(reqs)]);
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
    assert.equal(api.seen.length, seen0, "B's provider was not called for A");
  });

  it("organization-level routes answer A's own things only", async () => {
    const list = await call(tA, "GET", "/v1/units");
    assert.deepEqual(
      list.body.sprites.map((u: { id: string }) => u.id),
      [id.aShared],
    );
    const org = await call(tA, "GET", "/v1/organization");
    assert.equal(org.status, 200);
    assert.ok(!JSON.stringify(org.body).includes("beta"), JSON.stringify(org.body));
    assert.equal((await call(tA, "GET", "/v1/oauth/providers")).status, 200); // the registry: the same for everyone
    const conns = await call(tA, "GET", "/v1/oauth/connections");
    assert.deepEqual(
      conns.body.connections.map((c: { id: string }) => c.id),
      [aAdminConn],
    );
    const key = await call(tA, "POST", "/v1/oauth/connections/api_key", {
      json: { provider: "custom_api", api_key: "a-key", base_api_url: api.url },
    });
    assert.equal(key.status, 201, key.text);
    const prov = await call(tA, "POST", "/v1/oauth/connections/provision", { json: { provider: "sprites_admin" } });
    assert.equal(prov.status, 201, prov.text);
    const authorize = await call(tA, "GET", "/v1/oauth/github/authorize?redirect_uri=https://app.example/cb");
    assert.equal(authorize.status, 200);
    assert.notEqual(authorize.body.state, b.state);
    // B's OAuth state cannot be completed by A.
    const cb = await call(tA, "POST", "/v1/oauth/github/callback", {
      json: { code: "x", state: b.state, redirect_uri: "https://app.example/cb" },
    });
    assert.equal(cb.status, 400, cb.text);
    // A may name a unit like B's: it is A's own, another unit.
    const mine = await call(tA, "POST", "/v1/units", { json: { name: "bonly" } });
    assert.equal(mine.status, 201, mine.text);
    assert.notEqual(mine.body.id, id.bOnly);
    assert.equal((await call(tA, "DELETE", "/v1/units/bonly")).status, 204);
    assert.equal((await call(tA, "DELETE", "/v1/units/shared")).status, 204);
    for (const r of [list, org, conns, key, prov, authorize, cb, mine]) noLeak("org-level", "", r.text);
  });

  it("nothing of B changed, and B still reaches all of it", async () => {
    assert.deepEqual(await snapshotB(), before0);
    assert.equal((await asB("GET", `/v1/units/bonly/fs/read?path=${B_FILE}&workingDir=/`)).text, B_SECRET);
    const app = await request(`${s.url}/x`, { headers: { host: bHost, authorization: `Bearer ${tB}` } });
    assert.equal(app.status, 200);
  });
});
