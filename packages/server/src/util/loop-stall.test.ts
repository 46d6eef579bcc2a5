import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { watchLoopStalls } from "./loop-stall.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const block = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end) {}
};

describe("event loop stalls", () => {
  it("reports a blocked loop once, with how long, and nothing while it runs freely", async () => {
    const stalls: number[] = [];
    const stop = watchLoopStalls((ms) => stalls.push(ms), { everyMs: 20, thresholdMs: 200 });
    try {
      await sleep(150);
      assert.deepEqual(stalls, [], "no stall while the loop runs");
      block(450);
      await sleep(80);
      assert.equal(stalls.length, 1, `one stall: ${stalls}`);
      assert.ok((stalls[0] ?? 0) >= 350 && (stalls[0] ?? 0) < 2000, `its length: ${stalls[0]}`);
      await sleep(100);
      assert.equal(stalls.length, 1, "reported once");
    } finally {
      stop();
    }
  });

  it("reports nothing once stopped", async () => {
    const stalls: number[] = [];
    const stop = watchLoopStalls((ms) => stalls.push(ms), { everyMs: 10, thresholdMs: 50 });
    stop();
    block(150);
    await sleep(50);
    assert.deepEqual(stalls, []);
  });
});
