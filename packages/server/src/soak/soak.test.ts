// Issue #20, soak in the suite: the seeded random workload of bench/soak.mjs for 3 minutes (CI;
// UMS_SOAK_MINUTES shortens it locally) against a real `ums serve`; any invariant violation fails
// the test, which prints the seed to replay it with `node bench/soak.mjs --seed N`. The seed is fixed
// (UMS_SOAK_SEED names another, or `random` for a new draw).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { suiteSeed } from "./rng.js";
import { formatReport, runSoak } from "./run.js";

describe("soak: a seeded random workload with its invariants checked", () => {
  it("runs without a violation and leaves nothing on the host", async () => {
    const seed = suiteSeed(process.env.UMS_SOAK_SEED, 897724952);
    const minutes = Number(process.env.UMS_SOAK_MINUTES) || 3;
    console.log(
      `soak seed ${seed} (replay: node bench/soak.mjs --seed ${seed} --minutes ${minutes} --units 6 --verify-every 45)`,
    );
    const report = await runSoak({ seed, minutes, units: 6, verifyEvery: 45 });
    const text = formatReport(report);
    console.log(text);
    assert.ok(report.operations > 0, "operations ran");
    assert.deepEqual(report.violations, [], `seed ${seed}:\n${text}`);
    assert.equal(report.lost, 0);
    assert.deepEqual(report.leftovers, []);
  });
});
