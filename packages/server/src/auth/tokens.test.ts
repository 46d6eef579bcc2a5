import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { generateToken, hashToken, parseBearer, randomString } from "./tokens.js";

describe("tokens", () => {
  it("are long, random and URL-safe", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const t = generateToken();
      assert.match(t, /^ums_[0-9A-Za-z]{43}$/);
      seen.add(t);
    }
    assert.equal(seen.size, 1000);
  });

  it("hash to a stable SHA-256 that differs per token", () => {
    assert.equal(hashToken("a"), "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb");
    assert.notEqual(hashToken(generateToken()), hashToken(generateToken()));
  });

  it("draw every alphabet character without bias", () => {
    const counts = new Map<string, number>();
    for (const c of randomString(62_000)) counts.set(c, (counts.get(c) ?? 0) + 1);
    assert.equal(counts.size, 62);
    for (const n of counts.values()) assert.ok(n > 700 && n < 1300, String(n));
  });

  it("parse RFC 6750 bearer headers", () => {
    assert.equal(parseBearer("Bearer abc.DEF-_~+/="), "abc.DEF-_~+/=");
    assert.equal(parseBearer("bearer   tok"), "tok");
    for (const bad of [undefined, "", "Bearer", "Bearer ", "Basic abc", "Bearer a b", "Bearer a\tb", "Bearerabc"]) {
      assert.equal(parseBearer(bad), undefined, String(bad));
    }
    fc.assert(fc.property(fc.string(), (h) => void parseBearer(h)));
  });
});
