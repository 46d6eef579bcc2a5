import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CFS_PERIOD_US, cfsQuota, unitsCpuBudget, unitsCpuShares } from "./cpu-share.js";
import { pressing } from "./cpu-weights.js";

describe("CPU fair share arithmetic", () => {
  it("turns cores into a CFS quota per 100 ms period, never below the kernel's 1 ms", () => {
    assert.deepEqual(cfsQuota(1), { quota: 100_000, period: CFS_PERIOD_US });
    assert.deepEqual(cfsQuota(0.5), { quota: 50_000, period: 100_000 });
    assert.deepEqual(cfsQuota(2.25), { quota: 225_000, period: 100_000 });
    assert.deepEqual(cfsQuota(0.001), { quota: 1000, period: 100_000 });
  });

  it("leaves a multi-core host half a core, and gives a single core whole", () => {
    assert.equal(unitsCpuBudget(2), 1.5);
    assert.equal(unitsCpuBudget(16), 15.5);
    assert.equal(unitsCpuBudget(1), 1);
  });

  it("weighs all units together a quarter of the server's cgroup", () => {
    assert.equal(unitsCpuShares(1024), 256);
    assert.equal(unitsCpuShares(100), 25);
    assert.equal(unitsCpuShares(2), 2, "never below the kernel's minimum of 2");
  });
});

describe("units pressing against their limits", () => {
  const at = (forksRefused: number, periods: number, throttled: number) => ({ forksRefused, periods, throttled });
  it("press when forks were refused at the pids limit since the last reading", () => {
    assert.equal(pressing(at(5, 100, 0), at(6, 110, 0)), true);
    assert.equal(pressing(at(5, 100, 0), at(5, 110, 0)), false);
  });
  it("press when throttled in at least 80% of at least five busy CFS periods, not in a burst now and then", () => {
    assert.equal(pressing(at(0, 100, 10), at(0, 110, 19)), true, "9 of 10 periods");
    assert.equal(pressing(at(0, 100, 10), at(0, 105, 14)), true, "4 of 5 periods");
    assert.equal(pressing(at(0, 100, 10), at(0, 110, 15)), false, "5 of 10 periods");
    assert.equal(pressing(at(0, 100, 10), at(0, 103, 13)), false, "3 of 3 periods: too few to tell");
    assert.equal(pressing(at(0, 100, 10), at(0, 100, 10)), false, "no busy period (idle or frozen)");
  });
});
