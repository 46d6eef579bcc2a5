import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { decodeContinuation, encodeContinuation } from "./pagination.js";

describe("continuation tokens", () => {
  it("round-trip every valid unit name", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z](?:-?[a-z0-9]){0,20}$/), (name) => {
        const token = encodeContinuation(name);
        assert.match(token, /^[A-Za-z0-9_-]+$/, "URL-safe");
        assert.equal(decodeContinuation(token), name);
      }),
    );
  });

  it("reject anything else without throwing", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 600 }), (junk) => {
        const out = decodeContinuation(junk);
        assert.ok(out === undefined || typeof out === "string");
      }),
    );
    const forged = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    for (const t of [
      "",
      "!!!",
      forged({ v: 2, after: "abc" }),
      forged({ v: 1, after: "ABC" }),
      forged({ v: 1, after: 5 }),
      forged({ v: 1 }),
      forged(null),
      forged(["abc"]),
      forged({ v: 1, after: "x".repeat(60) }),
      Buffer.from("{not json").toString("base64url"),
    ]) {
      assert.equal(decodeContinuation(t), undefined, t);
    }
  });
});
