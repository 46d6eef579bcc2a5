import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DecisionLog } from "./decision-log.js";

describe("decision log", () => {
  it("keeps the last entries, oldest first, and counts every denial", () => {
    const log = new DecisionLog(3);
    for (let i = 0; i < 5; i++) {
      log.add({ time: "t", name: `n${i}`, type: "A", verdict: i % 2 ? "denied" : "allowed" });
    }
    assert.deepEqual(
      log.recent(10).map((d) => d.name),
      ["n2", "n3", "n4"],
    );
    assert.deepEqual(
      log.recent(2).map((d) => d.name),
      ["n3", "n4"],
    );
    assert.equal(log.deniedLookups, 2);
  });
});
