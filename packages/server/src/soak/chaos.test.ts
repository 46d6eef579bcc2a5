// Issue #20, chaos in the suite: the soak's workload while `ums serve` is killed with SIGKILL at
// random moments (restarted on the same data dir), and units' agents and PID 1s are killed. After
// every kill: the same invariants, re-adoption, nothing acknowledged lost. About 2 minutes
// (UMS_CHAOS_MINUTES changes it). The seed is fixed (UMS_CHAOS_SEED names another, or `random`)
// and printed to replay with `bench/soak.mjs --chaos`.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { suiteSeed } from "./rng.js";
import { formatReport, runSoak } from "./run.js";

describe("chaos: kill -9 of ums serve, of units' agents and PID 1s, under the soak workload", () => {
  it("survives every kill and loses nothing acknowledged", async () => {
    const seed = suiteSeed(process.env.UMS_CHAOS_SEED, 1940572711);
    const minutes = Number(process.env.UMS_CHAOS_MINUTES) || 2;
    console.log(
      `chaos seed ${seed} (replay: node bench/soak.mjs --chaos --seed ${seed} --minutes ${minutes} --units 5 --kill-gap 12,25 --verify-every 3600)`,
    );
    const report = await runSoak({ seed, minutes, units: 5, chaos: true, killGap: [12, 25], verifyEvery: 3600 });
    const text = formatReport(report);
    console.log(text);
    assert.ok(report.kills.server >= 1, `ums serve was killed at least once:\n${text}`);
    assert.deepEqual(report.violations, [], `seed ${seed}:\n${text}`);
    assert.equal(report.lost, 0);
    assert.equal(report.kills.survived, report.kills.server + report.kills.agent + report.kills.init);
  });
});
