import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import { testDialects } from "./dialects.js";
import { execHttp } from "./exec-client.js";
import { type FakeOAuth, fakeBearerApi, fakeGithub, fakeOAuth, writeConnectorsConfig } from "./fake-providers.js";
import { GATEWAY_CLIENT } from "./gateway-client.js";
import { type ApiResponse, startTestServer, type TestServer } from "./server.js";
import { openWebsocket, request, startUnitApp } from "./unit-app.js";

// Issue 19, "cross-organization access on every route": organizations A and B; B has a unit named like
// A's ("shared") and one A lacks ("bonly"), with files, services, checkpoints, policies, labels, exec
// sessions, a unit URL and connectors. Every route of the OpenAPI document (GET /v1/openapi.json, made
// from the route schemas) is called with A's token against B's things: a unit A lacks answers 404 and
// a unit of the same name is A's own; no answer carries B's data, and nothing of B changes. Websocket
// routes are tried with an upgrade too; then the unit URL, the proxy, the connectors and the connector
// gateway (from inside A's unit). A route that is neither exercised here nor listed as organization-
// less fails the test, so a new route is covered when it is added.
//
// The suite is in two files (security/cross-org*.test.ts), each on a server of its own with B's things
// made anew: this module is their set-up and the cases of every route.

const rand = () => randomBytes(8).toString("hex");
const B_SECRET = `b-secret-${rand()}`;
const B_LABEL = `b-label-${rand()}`;
const B_SERVICE_MARK = `b-service-${rand()}`;
export const B_SESSION_MARK = `b-session-${rand()}`;
export const B_FILE = "/home/unit/b-secret.txt";
const TIMEOUT_MS = 120_000;

type Answer = Pick<ApiResponse, "status" | "text" | "body">;

/** What a route is called with: its JSON body, query string, or raw body (every one valid, so that only the unit decides). */
export interface Example {
  json?: unknown;
  query?: string;
  body?: string;
}

/** The identifiers in a call against B: the unit's name and the ids of things of B. */
export interface Target {
  name: string;
  checkpoint: string;
  session: string;
  service: string;
  conn: string;
}

/** A valid request for every route that names a unit or a connector (keys: "METHOD openapi-path"). */
export const EXAMPLES: Record<string, (t: Target) => Example> = {
  "GET /v1/units/{name}": () => ({}),
  "PUT /v1/units/{name}": () => ({ json: { labels: ["a-label"], url_settings: { auth: "public" } } }),
  "DELETE /v1/units/{name}": () => ({}),
  "GET /v1/units/{name}/check": () => ({}),
  "GET /v1/units/{name}/metrics": () => ({ query: "window=1h" }),
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
  "POST /v1/units/{name}/move": () => ({ json: {} }),
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
  "GET /v1/units/{name}/control": () => ({}),
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
  "GET /v1/units/{name}/proxy": () => ({}),
  "GET /v1/units/{name}/ports/watch": () => ({}),
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
export const ORG_LEVEL = new Set([
  "GET /v1/units",
  "POST /v1/units",
  "GET /v1/organization",
  "GET /v1/oauth/providers",
  "GET /v1/oauth/connections",
  "POST /v1/oauth/connections/api_key",
  "POST /v1/oauth/connections/provision",
  "GET /v1/oauth/{provider}/authorize",
  "POST /v1/oauth/{provider}/callback",
  "POST /v1/organizations/{org}/tokens",
  "GET /v1/organizations/{org}/tokens",
  "DELETE /v1/organizations/{org}/tokens/{id}",
  "GET /v1/organizations/{org}/audit",
  // Issue #14: the console session is the caller's own (api/console/session.test.ts: another
  // organization's cookie sees nothing).
  "POST /v1/console/session",
  "GET /v1/console/session",
  "DELETE /v1/console/session",
  // Issue #17: the caller's organization's events and webhooks (events/events.test.ts,
  // events/webhooks.test.ts: another organization's are not seen, its webhook is a 404), and the
  // server-wide metrics, which name no organization nor unit (metrics/metrics.test.ts).
  "GET /v1/events",
  "POST /v1/webhooks",
  "GET /v1/webhooks",
  "GET /v1/webhooks/{id}",
  "DELETE /v1/webhooks/{id}",
  "GET /metrics",
  // Issue #18: the caller's organization's templates (api/templates/templates.test.ts: another
  // organization gets 404 on every use).
  "POST /v1/templates",
  "GET /v1/templates",
  "GET /v1/templates/{name}",
  "DELETE /v1/templates/{name}",
  // Issue #18: the caller's organization's images (api/images/images.test.ts: another organization
  // does not see them, gets 404 on get, delete and create-from, and its imports and builds are its own).
  "GET /v1/images",
  "POST /v1/images",
  "GET /v1/images/{name}",
  "DELETE /v1/images/{name}",
  "POST /v1/images/build",
  // Issue #15: the nodes, server-wide like the metrics: no organization's unit or record, only
  // hosts and their unit counts, for admin tokens (api/nodes/nodes.test.ts).
  "GET /v1/nodes",
  "GET /v1/nodes/{name}",
]);

/** The concrete path of an OpenAPI path for a target. */
export function fill(path: string, t: Target): string {
  const idOf = path.includes("/checkpoints/") ? t.checkpoint : path.includes("/exec/") ? t.session : t.conn;
  return path
    .replace("{name}", encodeURIComponent(t.name))
    .replace("{id}", encodeURIComponent(idOf))
    .replace("{service}", encodeURIComponent(t.service))
    .replace("{provider}", "github")
    .replace("{*}", "cross/org");
}

/**
 * What the set-up made: the server, A's and B's tokens, the fake provider B's custom_api connector
 * calls, every route of the OpenAPI document ([METHOD, path]), the unit URL hosts of B's "bonly" and
 * A's "shared", A's admin connector and the connector gateway as A's unit reaches it.
 */
interface Made {
  s: TestServer;
  tA: string;
  tB: string;
  api: Awaited<ReturnType<typeof fakeBearerApi>>;
  ops: [string, string][];
  bHost: string;
  aHost: string;
  aAdminConn: string;
  aGateway: string;
}

/** The suite's server, organizations and B's things (once made), and what its tests call and check with. */
export type CrossOrg = ReturnType<typeof crossOrgSuite>;

/**
 * For the enclosing `describe`: the server with organizations A and B and B's things, made before its
 * first test, closed (with the fakes) after its last. Returns the suite's handle (usable once made).
 */
export function crossOrgSuite() {
  const sqlite = testDialects[0];
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
    Object.assign(suite, { s, tA, tB, api, ops, bHost, aHost, aAdminConn, aGateway } satisfies Made);
  });
  after(async () => {
    await s?.close();
    await oauth?.close();
    await api?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const suite = {
    call,
    asB,
    noLeak,
    id,
    b,
    /** Nothing of B changed since the set-up, and B still reaches all of it. */
    async bUnchanged() {
      assert.deepEqual(await snapshotB(), before0);
      assert.equal((await asB("GET", `/v1/units/bonly/fs/read?path=${B_FILE}&workingDir=/`)).text, B_SECRET);
      const app = await request(`${s.url}/x`, { headers: { host: bHost, authorization: `Bearer ${tB}` } });
      assert.equal(app.status, 200);
    },
  };
  return suite as typeof suite & Made;
}
