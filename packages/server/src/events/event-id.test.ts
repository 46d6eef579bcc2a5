import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EventIds, eventId, eventIdAfter, eventIdFloor, isEventId } from "./event-id.js";

describe("event ids", () => {
  it("increase within one process, also within one millisecond and when the clock goes back", () => {
    const ids = new EventIds();
    const made = [ids.next(1000), ids.next(1000), ids.next(999), ids.next(1001)];
    for (const id of made) assert.ok(isEventId(id), id);
    assert.deepEqual([...made].sort(), made);
    assert.equal(new Set(made).size, 4);
  });

  it("eventIdAfter is larger than the id it follows, and than any id of an earlier time", () => {
    const last = eventId(1_700_000_000_000, 5);
    const next = eventIdAfter(last);
    assert.ok(isEventId(next), next);
    assert.ok(next > last, `${next} > ${last}`);
    assert.ok(next < eventId(1_700_000_000_001, 0), "it stays in the same millisecond while it can");
    // The last sequence number of a millisecond: the next is the next millisecond's first.
    const full = eventId(1_700_000_000_000, 36 ** 4 - 1);
    const carried = eventIdAfter(full);
    assert.ok(carried > full);
    assert.equal(carried.slice(0, 17), eventId(1_700_000_000_001, 0).slice(0, 17));
  });

  it("eventIdFloor is below every id of that millisecond and above every earlier one", () => {
    const floor = eventIdFloor(1_700_000_000_000);
    assert.ok(floor <= eventId(1_700_000_000_000, 0));
    assert.ok(floor > eventId(1_699_999_999_999, 36 ** 4 - 1));
  });
});
