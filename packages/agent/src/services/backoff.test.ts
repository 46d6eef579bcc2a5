import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BACKOFF_CAP_MS, backoffMs, HEALTHY_RUN_MS, nextAttempt } from "./backoff.js";

describe("restart backoff", () => {
  it("doubles from 1 s to the 30 s cap", () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 100].map(backoffMs), [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    assert.equal(backoffMs(1e9), BACKOFF_CAP_MS);
  });

  it("starts over after a healthy run", () => {
    assert.equal(nextAttempt(0, 10), 1);
    assert.equal(nextAttempt(4, 10), 5);
    assert.equal(nextAttempt(4, HEALTHY_RUN_MS), 1);
  });
});
