import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SerializerSelector } from "@fastify/fast-json-stringify-compiler";
import { startSqliteServer, type TestServer } from "../testing/server.js";
import { openApiDocument } from "./openapi-document.js";
import { lazySerializers } from "./serializers.js";
import { compileNow } from "./validation.js";

describe("OpenAPI document", () => {
  let s: TestServer;
  // biome-ignore lint/suspicious/noExplicitAny: the document is arbitrary JSON.
  let doc: any;
  before(async () => {
    s = await startSqliteServer();
    doc = (await s.api("GET", "/v1/openapi.json")).body;
  });
  after(() => s?.close());

  it("is OpenAPI 3.1 with bearer security and the API version", () => {
    assert.equal(doc.openapi, "3.1.0");
    assert.match(doc.info.version, /^\d+\.\d+\.\d+$/);
    assert.deepEqual(doc.components.securitySchemes.bearer, { type: "http", scheme: "bearer" });
    assert.deepEqual(doc.security, [{ bearer: [] }]);
  });

  it("documents every route with its request and response schemas", () => {
    const ops = Object.entries(doc.paths).flatMap(([p, o]) =>
      Object.entries(o as object).map(([m, op]) => ({ p, m, op })),
    );
    assert.ok(ops.length >= 8);
    for (const { p, m, op } of ops) {
      assert.ok(op.summary, `${m} ${p} has a summary`);
      assert.ok(Object.keys(op.responses).length > 0, `${m} ${p} has responses`);
    }
    const create = doc.paths["/v1/units"].post;
    const body = create.requestBody.content["application/json"].schema;
    assert.deepEqual(body.required, ["name"]);
    assert.equal(body.properties.name.maxLength, 54);
    const unit = create.responses["201"].content["application/json"].schema;
    assert.ok(
      ["id", "name", "organization", "url", "status", "created_at", "updated_at"].every((f) =>
        unit.required.includes(f),
      ),
    );
    const list = doc.paths["/v1/units"].get;
    const maxResults = list.parameters.find((x: { name: string }) => x.name === "max_results");
    assert.deepEqual([maxResults.schema.minimum, maxResults.schema.maximum, maxResults.schema.default], [1, 500, 50]);
  });

  it("has request and response schemas that all compile (routes compile theirs at first use)", () => {
    const serializers = lazySerializers({}, {})({ schema: {}, method: "GET", url: "/", httpStatus: "200" });
    assert.equal(serializers({}), "{}", "a built serializer answers");
    const compileSerializer = SerializerSelector()({}, {});
    let n = 0;
    for (const [p, ops] of Object.entries(doc.paths)) {
      type Op = {
        parameters?: { in: string; schema: object }[];
        requestBody?: { content: Record<string, { schema?: object }> };
        responses: Record<string, { content?: Record<string, { schema?: object }> }>;
      };
      for (const [m, op] of Object.entries(ops as Record<string, Op>)) {
        const where = `${m.toUpperCase()} ${p}`;
        for (const param of op.parameters ?? []) {
          assert.doesNotThrow(() => compileNow(param.schema, param.in === "path" ? "params" : "querystring"), where);
          n++;
        }
        for (const c of Object.values(op.requestBody?.content ?? {})) {
          if (c.schema) assert.doesNotThrow(() => compileNow(c.schema as object, "body"), where);
          n++;
        }
        for (const [status, r] of Object.entries(op.responses)) {
          for (const c of Object.values(r.content ?? {})) {
            if (!c.schema) continue;
            assert.doesNotThrow(
              () => compileSerializer({ schema: c.schema as object, method: m, url: p, httpStatus: status }),
              `${where} ${status}`,
            );
            n++;
          }
        }
      }
    }
    assert.ok(n > 100, `${n} schemas compiled`);
  });

  it("is the document built without units that docs/API.md is rendered from", async () => {
    assert.deepEqual(await openApiDocument(), doc);
  });
});
