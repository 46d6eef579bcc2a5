// Issue #17 part 1: Prometheus metrics. Who may read them, that the series move with what the
// server did, and that no label ever names a unit or an organization.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../testing/exec-client.js";
import { freePort } from "../testing/free-port.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

const ORG = "org-plugh-secret";
const UNIT = "unit-xyzzy-secret";

interface Series {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** The text exposition format (version 0.0.4), samples only. */
function parse(text: string): Series[] {
  const out: Series[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] as string] = l[2] as string;
    }
    out.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return out;
}

const value = (all: Series[], name: string, labels: Record<string, string> = {}) =>
  all
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);

describe("Prometheus metrics (issue #17)", { timeout: 120_000 }, () => {
  let s: TestServer;
  let admin: string;
  let member: string;
  let unitId: string;
  let metricsPort: number;
  before(async () => {
    metricsPort = await freePort();
    s = await startSqliteServer({ metricsListen: `127.0.0.1:${metricsPort}` });
    admin = await s.token(ORG);
    member = await s.token(ORG, { role: "member" });
    unitId = await s.unit(admin, UNIT);
  });
  after(() => s?.close());

  const scrape = async () => {
    const r = await s.api("GET", "/metrics", { token: admin });
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    return parse(r.text);
  };

  it("GET /metrics: 401 without a token, 403 UMS_ADMIN_REQUIRED for a member token, 200 for an admin", async () => {
    const none = await s.api("GET", "/metrics");
    assert.equal(none.status, 401);
    assert.equal(none.body.code, "UMS_UNAUTHORIZED");
    const m = await s.api("GET", "/metrics", { token: member });
    assert.equal(m.status, 403);
    assert.equal(m.body.code, "UMS_ADMIN_REQUIRED");
    await scrape();
  });

  it("--metrics-listen serves the same exposition without a token, and nothing else", async () => {
    const r = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(r.status, 200);
    assert.ok(parse(await r.text()).some((x) => x.name === "ums_http_requests_total"));
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/v1/units`)).status, 404);
  });

  it("counts requests by route pattern and status, with durations; boots, exec sessions and units by status move", async () => {
    const before = await scrape();
    const listRoute = { method: "GET", route: "/v1/units" };
    const countBefore = value(before, "ums_http_requests_total", { ...listRoute, status: "200" });
    for (let i = 0; i < 3; i++) assert.equal((await s.api("GET", "/v1/units", { token: admin })).status, 200);
    assert.equal((await s.api("GET", "/v1/units/no-such-unit", { token: admin })).status, 404);
    const r = await execHttp(s.url, admin, UNIT, ["true"]);
    assert.equal(r.exitCode, 0);
    const after = await scrape();
    assert.equal(value(after, "ums_http_requests_total", { ...listRoute, status: "200" }), countBefore + 3);
    assert.ok(value(after, "ums_http_requests_total", { route: "/v1/units/:name", status: "404" }) >= 1);
    assert.ok(
      value(after, "ums_http_request_duration_seconds_count", listRoute) >=
        value(before, "ums_http_request_duration_seconds_count", listRoute) + 3,
    );
    assert.ok(value(after, "ums_http_requests_total", { method: "POST", route: "/v1/units/:name/exec" }) >= 1);
    assert.equal(
      value(after, "ums_unit_operation_duration_seconds_count", { operation: "boot" }),
      value(before, "ums_unit_operation_duration_seconds_count", { operation: "boot" }) + 1,
    );
    assert.ok(value(after, "ums_units", { status: "running" }) >= 1);
    // The session's agent socket closes just after the answer ends.
    let open = value(after, "ums_exec_sessions_open");
    for (let i = 0; i < 50 && open !== 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      open = value(await scrape(), "ums_exec_sessions_open");
    }
    assert.equal(open, 0, "the exec's session is closed again");
    for (const name of [
      "ums_process_cpu_seconds_total",
      "ums_nodejs_eventloop_lag_seconds",
      "ums_process_resident_memory_bytes",
      "ums_faults",
      "ums_resolver_lookups_total",
      "ums_gateway_requests_total",
      "ums_fs_bytes_total",
      "ums_usage_sampler_cpu_seconds_total",
    ]) {
      assert.ok(
        after.some((x) => x.name === name),
        `series ${name} is exposed`,
      );
    }
  });

  it("counts file bytes moved through the files API", async () => {
    const before = await scrape();
    const body = Buffer.alloc(12_345, 7);
    const w = await s.api("PUT", `/v1/units/${UNIT}/fs/write?workingDir=/tmp&path=m.bin`, { token: admin, body });
    assert.equal(w.status, 200, w.text);
    const r = await s.api("GET", `/v1/units/${UNIT}/fs/read?workingDir=/tmp&path=m.bin`, { token: admin });
    assert.equal(r.status, 200);
    const after = await scrape();
    assert.equal(
      value(after, "ums_fs_bytes_total", { direction: "write" }) -
        value(before, "ums_fs_bytes_total", { direction: "write" }),
      12_345,
    );
    assert.equal(
      value(after, "ums_fs_bytes_total", { direction: "read" }) -
        value(before, "ums_fs_bytes_total", { direction: "read" }),
      12_345,
    );
  });

  it("no label of any series holds a unit's or an organization's name or id", async () => {
    // Requests that carry the names in their URLs, some of them failing.
    await s.api("GET", `/v1/units/${UNIT}`, { token: admin });
    await s.api("GET", `/v1/units/${UNIT}-missing/metrics`, { token: admin });
    await s.api("GET", `/v1/organizations/${ORG}/tokens`, { token: admin });
    await s.api("GET", `/v1/units/${UNIT}/nothing/here`, { token: admin });
    const all = await scrape();
    assert.ok(all.length > 50);
    const org = await s.server.store.orgs.getBySlug(ORG);
    const secrets = [ORG, UNIT, unitId, org?.id ?? "?"];
    for (const series of all) {
      for (const [k, v] of Object.entries(series.labels)) {
        for (const secret of secrets) {
          assert.ok(!v.includes(secret), `${series.name}{${k}="${v}"} names ${secret}`);
        }
      }
    }
    // Route labels are patterns: a URL no route matched is "unmatched".
    const routes = new Set(all.flatMap((x) => (x.labels.route ? [x.labels.route] : [])));
    for (const r of routes) assert.ok(r === "unmatched" || r.startsWith("/"), r);
  });
});

describe("--no-metrics (issue #17)", { timeout: 60_000 }, () => {
  let s: TestServer;
  let admin: string;
  before(async () => {
    s = await startSqliteServer({ metrics: false });
    admin = await s.token("nometrics");
    await s.unit(admin, "quiet");
  });
  after(() => s?.close());

  it("has no /metrics route and no sampler; a unit's usage says it is not sampled", async () => {
    const r = await s.api("GET", "/metrics", { token: admin });
    assert.equal(r.status, 404);
    assert.equal(s.server.sampler, undefined);
    const u = await s.api("GET", "/v1/units/quiet/metrics", { token: admin });
    assert.equal(u.status, 200, u.text);
    assert.equal(u.body.sampling, false);
    assert.deepEqual(u.body.samples, []);
  });
});
