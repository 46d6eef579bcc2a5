// Issue #17 part 5: with OTEL_EXPORTER_OTLP_ENDPOINT set, the server exports a span per request
// (a child of the caller's traceparent) and one per agent call (a child of the request's) to an
// OTLP/HTTP receiver; without it, no tracer exists and nothing is exported.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { startSqliteServer, type TestServer } from "../testing/server.js";
import { activeTracer } from "./tracing.js";

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: Record<string, unknown> }[];
}

describe("tracing over OTLP/HTTP", { timeout: 120_000 }, () => {
  let collector: Server;
  const spans: OtlpSpan[] = [];
  const paths: string[] = [];
  let s: TestServer | undefined;

  before(async () => {
    collector = createServer((req, res) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (c: string) => {
        body += c;
      });
      req.on("end", () => {
        paths.push(`${req.method} ${req.url} ${req.headers["content-type"]}`);
        const doc = JSON.parse(body);
        for (const rs of doc.resourceSpans) {
          assert.deepEqual(rs.resource.attributes[0], { key: "service.name", value: { stringValue: "ums" } });
          for (const ss of rs.scopeSpans) spans.push(...ss.spans);
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", () => r()));
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
    try {
      s = await startSqliteServer();
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    }
  });
  after(async () => {
    await s?.close();
    collector?.closeAllConnections();
    collector?.close();
  });

  it("exports a span per request, child of the caller's traceparent, and its agent calls as children", async () => {
    assert.ok(activeTracer(), "a tracer while the endpoint is set");
    const srv = s as TestServer;
    const token = await srv.token("traced");
    await srv.unit(token, "tr");
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parentId = "00f067aa0ba902b7";
    const r = await srv.api("GET", "/v1/units/tr/services", {
      token,
      headers: { traceparent: `00-${traceId}-${parentId}-01` },
    });
    assert.equal(r.status, 200, r.text);
    const deadline = Date.now() + 20_000;
    let request: OtlpSpan | undefined;
    let agent: OtlpSpan | undefined;
    while (Date.now() < deadline && !(request && agent)) {
      request = spans.find((sp) => sp.name === "GET /v1/units/:name/services" && sp.traceId === traceId);
      agent = request && spans.find((sp) => sp.parentSpanId === request?.spanId);
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(request, `no request span among ${spans.map((sp) => sp.name).join(", ")}`);
    assert.equal(request.parentSpanId, parentId);
    assert.equal(request.kind, 2);
    const status = request.attributes.find((a) => a.key === "http.response.status_code");
    assert.deepEqual(status?.value, { intValue: "200" });
    assert.ok(BigInt(request.endTimeUnixNano) >= BigInt(request.startTimeUnixNano));
    assert.ok(agent, `no agent span under the request among ${spans.map((sp) => sp.name).join(", ")}`);
    assert.equal(agent.traceId, traceId);
    assert.equal(agent.kind, 3);
    assert.match(agent.name, /^agent GET \/services/);
    assert.ok(
      paths.every((p) => p === "POST /v1/traces application/json"),
      paths.join("; "),
    );
    // A request without traceparent starts its own trace.
    await srv.api("GET", "/v1/units", { token });
    const own = await (async () => {
      for (let i = 0; i < 100; i++) {
        const sp = spans.find((x) => x.name === "GET /v1/units" && !x.parentSpanId);
        if (sp) return sp;
        await new Promise((res) => setTimeout(res, 100));
      }
      return undefined;
    })();
    assert.ok(own && own.traceId !== traceId);
  });

  it("without the endpoint, a server has no tracer", async () => {
    await s?.close();
    s = undefined;
    assert.equal(activeTracer(), undefined);
    const plain = await startSqliteServer();
    try {
      assert.equal(activeTracer(), undefined);
      const before = spans.length;
      const token = await plain.token("untraced");
      await plain.api("GET", "/v1/units", { token });
      await new Promise((res) => setTimeout(res, 1500));
      assert.equal(spans.length, before);
    } finally {
      await plain.close();
    }
  });
});
