import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseRateLimit, TokenBuckets } from "./token-bucket.js";

describe("token buckets", () => {
  it("allow the burst at once, then the rate, with the wait in whole seconds", () => {
    const b = new TokenBuckets({ perSecond: 2, burst: 3 });
    const t = 1_000_000;
    assert.deepEqual([b.take("a", t), b.take("a", t), b.take("a", t)], [0, 0, 0]);
    assert.equal(b.take("a", t), 1);
    // Another key has its own bucket.
    assert.equal(b.take("b", t), 0);
    // Half a second later one request is back (2 per second).
    assert.equal(b.take("a", t + 500), 0);
    assert.equal(b.take("a", t + 500), 1);
  });
  it("a slow rate waits more than a second", () => {
    const b = new TokenBuckets({ perSecond: 0.1, burst: 1 });
    assert.equal(b.take("a", 0), 0);
    assert.equal(b.take("a", 0), 10);
    assert.equal(b.take("a", 5_000), 5);
  });
  it("no limit takes nothing", () => {
    const b = new TokenBuckets({ perSecond: 0, burst: 0 });
    for (let i = 0; i < 100; i++) assert.equal(b.take("a", 0), 0);
    assert.equal(b.size, 0);
  });
  it("memory stays bounded however many keys come", () => {
    const b = new TokenBuckets({ perSecond: 1, burst: 5 });
    for (let i = 0; i < 25_000; i++) b.take(`k${i}`, i);
    assert.ok(b.size <= 10_000, `${b.size} keys`);
  });
  it("parses N, N/s, N/m and off", () => {
    assert.deepEqual(parseRateLimit("100"), { perSecond: 100, burst: 1000 });
    assert.deepEqual(parseRateLimit("5/s"), { perSecond: 5, burst: 50 });
    assert.deepEqual(parseRateLimit("60/m"), { perSecond: 1, burst: 10 });
    assert.deepEqual(parseRateLimit("off"), { perSecond: 0, burst: 0 });
    for (const bad of ["", "-1", "x", "5/h", "1e9"]) assert.equal(parseRateLimit(bad), undefined, bad);
  });
});
