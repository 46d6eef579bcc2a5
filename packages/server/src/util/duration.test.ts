import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDurationMs } from "./duration.js";

describe("durations", () => {
  it("read seconds and unit suffixes", () => {
    assert.equal(parseDurationMs("30"), 30_000);
    assert.equal(parseDurationMs("500ms"), 500);
    assert.equal(parseDurationMs("10s"), 10_000);
    assert.equal(parseDurationMs("2m"), 120_000);
    assert.equal(parseDurationMs("1h"), 3_600_000);
    assert.equal(parseDurationMs(" 0 "), 0);
  });
  it("reject anything else", () => {
    for (const bad of ["", "-1", "1.5s", "10x", "s", "1e3", "10 s", "9999999999"]) {
      assert.equal(parseDurationMs(bad), undefined, bad);
    }
  });
});
