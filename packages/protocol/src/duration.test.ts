import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDuration, parseDuration } from "./duration.js";

test("parseDuration accepts integer seconds and 10s-style strings (docs/ARCHITECTURE.md section 10)", () => {
  assert.equal(parseDuration("0"), 0);
  assert.equal(parseDuration("10"), 10_000);
  assert.equal(parseDuration("1.5"), 1500);
  assert.equal(parseDuration("10s"), 10_000);
  assert.equal(parseDuration("2m"), 120_000);
  assert.equal(parseDuration("1h"), 3_600_000);
  assert.equal(parseDuration("250ms"), 250);
  assert.equal(parseDuration("1m30s"), 90_000);
  assert.equal(parseDuration("1h2m3s"), 3_723_000);
  assert.equal(parseDuration(" 5s "), 5000);
  assert.equal(parseDuration("0.5s"), 500);
});

test("parseDuration rejects anything else", () => {
  for (const bad of ["", " ", "-1", "-5s", "10x", "s", "10s5", "1e3", "ten", "5 s", "1d", "0x10", "Infinity", "NaN"]) {
    assert.equal(parseDuration(bad), null, bad);
  }
});

test("formatDuration", () => {
  assert.equal(formatDuration(250), "250ms");
  assert.equal(formatDuration(1000), "1s");
  assert.equal(formatDuration(1500), "1.5s");
  assert.equal(formatDuration(120_000), "2m");
});
