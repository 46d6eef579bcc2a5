import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { testDialects } from "../testing/dialects.js";
import { startTestServer, type TestServer } from "../testing/server.js";

const RUNS = Number(process.env.UMS_FUZZ_RUNS ?? 60);

/** Values a careless or hostile client might send where JSON is expected. */
const jsonish = fc.oneof(
  fc.jsonValue(),
  fc.record({ name: fc.oneof(fc.string(), fc.jsonValue()), url_settings: fc.jsonValue() }, { requiredKeys: [] }),
  fc.record({ url_settings: fc.record({ auth: fc.string(), private_access: fc.jsonValue() }, { requiredKeys: [] }) }),
  fc.record({ version: fc.oneof(fc.string(), fc.jsonValue()) }),
);

const rawBody = fc.oneof(
  jsonish.map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString("latin1")),
);

const queryString = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom("max_results", "prefix", "continuation_token"), fc.string({ maxLength: 12 })),
      fc.oneof(fc.string({ maxLength: 40 }), fc.integer().map(String), fc.constantFrom("", "0", "-1", "501", "1e3")),
    ),
    { maxLength: 4 },
  )
  .map((pairs) => new URLSearchParams(pairs).toString());

const segment = fc.oneof(
  fc.constant("fuzz-target"),
  fc.string({ minLength: 1, maxLength: 70 }).map(encodeURIComponent),
  fc.constantFrom("..", "%2e%2e", "%2F", "a%00b", "UPPER", "-x", "x".repeat(300)),
);

/** Spec section 7 / issue: no input may produce a 500. Every route of the OpenAPI document is fuzzed. */
for (const dialect of testDialects) {
  describe(`fuzzing every route (${dialect.name})`, { skip: dialect.skip }, () => {
    let s: TestServer;
    let token: string;
    let routes: [string, string][];
    before(async () => {
      s = await startTestServer(dialect);
      token = await s.token("fuzz", { limits: { maxUnits: 100_000 } });
      await s.api("POST", "/v1/units", { token, json: { name: "fuzz-target" } });
      const doc = (await s.api("GET", "/v1/openapi.json")).body as { paths: Record<string, Record<string, unknown>> };
      routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
        Object.keys(ops).map((m) => [m.toUpperCase(), path] as [string, string]),
      );
    });
    // Requests tried per route, and the 5xx among them (issue #20's figure; only the unit's own
    // gateway answers on proxied paths may be 5xx, any other fails the run).
    const tried = new Map<string, { n: number; s5xx: number }>();
    const count = (route: string, status: number) => {
      const t = tried.get(route) ?? { n: 0, s5xx: 0 };
      t.n++;
      if (status >= 500) t.s5xx++;
      tried.set(route, t);
    };
    after(async () => {
      const rows = [...tried].sort(([a], [b]) => a.localeCompare(b));
      const total = rows.reduce((sum, [, t]) => sum + t.n, 0);
      const lines = rows.map(([r, t]) => `  ${r.padEnd(58)} ${String(t.n).padStart(5)} ${String(t.s5xx).padStart(4)}`);
      console.log(
        `fuzz (${dialect.name}): ${total} requests over ${rows.length} routes\n  ${"route".padEnd(58)} tried  5xx\n${lines.join("\n")}`,
      );
      await s?.close();
    });

    // Gateway statuses (RFC 9110 §15.6.2-5) are the unit's answer on proxied paths, not faults of ours.
    const check = (label: string, r: { status: number; text: string; body: unknown }, proxied = false) => {
      const ok = r.status < 500 || (proxied && [501, 502, 503, 504].includes(r.status));
      assert.ok(ok, `${label} -> ${r.status} ${r.text}`);
      if (r.status >= 400 && !label.startsWith("HEAD ")) {
        const body = r.body as { code?: unknown } | undefined;
        assert.equal(typeof body?.code, "string", `${label} -> error without code: ${r.text}`);
      }
    };

    it("covers the whole documented API", () => {
      const got = new Set(routes.map(([m, p]) => `${m} ${p}`));
      for (const r of [
        "GET /v1/units",
        "POST /v1/units",
        "GET /v1/units/{name}",
        "PUT /v1/units/{name}",
        "DELETE /v1/units/{name}",
        "GET /v1/units/{name}/check",
        "POST /v1/units/{name}/upgrade",
        "GET /v1/organization",
      ]) {
        assert.ok(got.has(r), `${r} is in the OpenAPI document`);
      }
    });

    it("never answers 500 to random bodies, query strings and path segments", async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 1000 }),
          segment,
          queryString,
          rawBody,
          fc.constantFrom("application/json", "application/json; charset=utf-8", "text/plain", undefined),
          async (pick, seg, query, body, contentType) => {
            const [method, template] = routes[pick % routes.length] ?? ["GET", "/v1/units"];
            const path = template.replace("{name}", seg).replace("{*}", `${seg}/x`);
            const headers: Record<string, string> = contentType ? { "content-type": contentType } : {};
            const hasBody = method !== "GET" && method !== "HEAD";
            const r = await s.api(method, `${path}?${query}`, { token, headers, ...(hasBody && { body }) });
            count(`${method} ${template}`, r.status);
            check(`${method} ${path}?${query} ${JSON.stringify(body).slice(0, 200)}`, r, template.includes("{*}"));
          },
        ),
        { numRuns: RUNS * routes.length },
      );
    });

    it("never answers 500 to random JSON bodies of the JSON routes", async () => {
      const jsonRoutes = routes.filter(([m]) => m === "POST" || m === "PUT");
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...jsonRoutes), jsonish, async ([method, template], json) => {
          const path = template.replace("{name}", "fuzz-target").replace("{*}", "some/path");
          const r = await s.api(method, path, { token, json });
          count(`${method} ${template}`, r.status);
          check(`${method} ${path} ${JSON.stringify(json).slice(0, 200)}`, r, template.includes("{*}"));
          if (r.status === 400) assert.ok(Array.isArray(r.body.errors) && r.body.errors.length > 0, r.text);
        }),
        { numRuns: RUNS * 4 },
      );
      assert.equal((await s.api("GET", "/healthz")).status, 200);
    });
  });
}
