import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../testing/dialects.js";
import { startTestServer, type TestServer } from "../testing/server.js";

/** Unit name rules through the API (rules: packages/protocol/src/names.ts). */
for (const dialect of testDialects) {
  describe(`unit names and request validation (${dialect.name})`, { skip: dialect.skip }, () => {
    let s: TestServer;
    let token: string;
    before(async () => {
      s = await startTestServer(dialect);
      token = await s.token("names", { limits: { maxUnits: 100 } });
    });
    after(() => s?.close());

    it("accepts valid names at the edges", async () => {
      for (const name of ["a", "a1", "a-b-c", "z9-0", `a${"b".repeat(53)}`]) {
        const r = await s.api("POST", "/v1/units", { token, json: { name } });
        assert.equal(r.status, 201, `${name}: ${r.text}`);
        assert.ok(new URL(r.body.url).hostname.split(".")[0]?.length ?? 99 <= 63);
      }
    });

    it("rejects invalid names with a 400 that says what is wrong", async () => {
      const bad: [unknown, RegExp][] = [
        ["", /^name: /],
        ["A", /^name: must be 1-54 characters/],
        ["1abc", /^name: /],
        ["-abc", /^name: /],
        ["abc-", /^name: /],
        ["a--b", /^name: /],
        ["a_b", /^name: /],
        ["a.b", /^name: /],
        ["ä", /^name: /],
        [`a${"b".repeat(54)}`, /^name: /],
        [5, /^name: must be a string$/],
        [null, /^name: must be a string$/],
        [["a"], /^name: must be a string$/],
      ];
      for (const [name, re] of bad) {
        const r = await s.api("POST", "/v1/units", { token, json: { name } });
        assert.equal(r.status, 400, `${JSON.stringify(name)}: ${r.text}`);
        assert.equal(r.body.code, "UMS_VALIDATION");
        assert.ok(
          r.body.errors.some((e: string) => re.test(e)),
          `${JSON.stringify(name)} -> ${JSON.stringify(r.body.errors)}`,
        );
      }
      const list = await s.api("GET", "/v1/units?max_results=500", { token });
      assert.ok(
        list.body.sprites.every((u: { name: string }) => /^[a-z]/.test(u.name)),
        "nothing half-created",
      );
    });

    it("names every bad field of a body at once", async () => {
      const r = await s.api("POST", "/v1/units", {
        token,
        json: { name: "Bad", url_settings: { auth: "nobody", extra: true }, colour: "red" },
      });
      assert.equal(r.status, 400);
      const text = r.body.errors.join("\n");
      assert.match(text, /^name: /m);
      assert.match(text, /^url_settings\.auth: must be one of "unit", "public"$/m);
      assert.match(text, /^url_settings\.extra: is not a known field$/m);
      assert.match(text, /^colour: is not a known field$/m);
    });

    it("rejects bodies that are not JSON objects", async () => {
      const cases: [string, Record<string, string>, number, string][] = [
        ["{", { "content-type": "application/json" }, 400, "UMS_BAD_JSON"],
        ["", { "content-type": "application/json" }, 400, "UMS_VALIDATION"],
        ["[]", { "content-type": "application/json" }, 400, "UMS_VALIDATION"],
        ['"name"', { "content-type": "application/json" }, 400, "UMS_VALIDATION"],
        ["null", { "content-type": "application/json" }, 400, "UMS_VALIDATION"],
        ["name=a", { "content-type": "application/x-www-form-urlencoded" }, 415, "UMS_UNSUPPORTED_MEDIA_TYPE"],
        ["name=a", { "content-type": "text/plain" }, 415, "UMS_UNSUPPORTED_MEDIA_TYPE"],
      ];
      for (const [body, headers, status, code] of cases) {
        const r = await s.api("POST", "/v1/units", { token, body, headers });
        assert.equal(r.status, status, `${body} ${JSON.stringify(headers)}: ${r.text}`);
        assert.equal(r.body.code, code, r.text);
        if (status === 400) assert.ok(Array.isArray(r.body.errors) && r.body.errors.length > 0);
      }
      const noBody = await s.api("POST", "/v1/units", { token });
      assert.equal(noBody.status, 400, noBody.text);
    });

    it("refuses a body over 1 MiB with 413", async () => {
      const r = await s.api("POST", "/v1/units", { token, json: { name: "big", pad: "x".repeat(1024 * 1024) } });
      assert.equal(r.status, 413);
      assert.equal(r.body.code, "UMS_PAYLOAD_TOO_LARGE");
    });

    it("validates list query parameters", async () => {
      const cases: [string, RegExp][] = [
        ["max_results=0", /^max_results: must be >= 1$/],
        ["max_results=501", /^max_results: must be <= 500$/],
        ["max_results=abc", /^max_results: must be an integer$/],
        ["max_results=1.5", /^max_results: must be an integer$/],
        ["prefix=ABC", /^prefix: /],
        ["prefix=a_", /^prefix: /],
        ["continuation_token=not-a-token", /^continuation_token: is not a token this server issued/],
        ["continuation_token=eyJ2IjoxLCJhZnRlciI6IkJBRCJ9", /^continuation_token: /],
        ["colour=red", /^colour: is not a known field$/],
      ];
      for (const [q, re] of cases) {
        const r = await s.api("GET", `/v1/units?${q}`, { token });
        assert.equal(r.status, 400, `${q}: ${r.text}`);
        assert.ok(
          r.body.errors.some((e: string) => re.test(e)),
          `${q} -> ${JSON.stringify(r.body.errors)}`,
        );
      }
      assert.equal(
        (await s.api("GET", "/v1/units?prefix=a-", { token })).status,
        200,
        "a prefix may end with a hyphen",
      );
      assert.equal((await s.api("GET", "/v1/units?prefix=", { token })).status, 200);
    });
  });
}
