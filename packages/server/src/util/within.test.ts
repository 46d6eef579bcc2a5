import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { within } from "./within.js";

const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

describe("within: a deadline that leaves no timer behind", () => {
  it("answers the promise's value and clears its timer, so the process can exit", async () => {
    const before = timers();
    assert.equal(await within(Promise.resolve(7), 300_000, -1), 7);
    assert.equal(timers(), before, "no 5-minute timer left");
    await assert.rejects(within(Promise.reject(new Error("boom")), 300_000, -1), /boom/);
    assert.equal(timers(), before);
  });

  it("answers the fallback when the deadline comes first", async () => {
    const never = new Promise<number>(() => {});
    assert.equal(await within(never, 10, -1), -1);
  });
});
