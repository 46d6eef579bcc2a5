import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CheckpointRecord, CheckpointReplica } from "../../store/records.js";
import { evictable, exportParent } from "./retention.js";

/** A row: `v<seq>`, taken on `source`, its copy `state` (none: no store). */
function cp(seq: number, state?: CheckpointReplica["state"], source: string | null = null): CheckpointRecord {
  return {
    unitId: "u",
    id: `v${seq}`,
    seq,
    comment: "",
    sourceId: source,
    createdAt: new Date(seq * 1000).toISOString(),
    auto: false,
    resources: "{}",
    privileges: "{}",
    network: "{}",
    ...(state && { replica: { state } }),
  } as CheckpointRecord;
}

/** v0..v(n-1), each taken on the one before, all stored. */
const chain = (n: number, state: CheckpointReplica["state"] = "replicated") =>
  Array.from({ length: n }, (_, i) => cp(i, state, i === 0 ? null : `v${i - 1}`));
const all = () => true;

/** Issue #15 retention: which local snapshots may go once the object store holds them. */
describe("retention rule", () => {
  it("keeps the N newest and evicts older stored ones, oldest first", () => {
    assert.deepEqual(evictable({ rows: chain(4), keep: 2, active: "v3", isLocal: all }), ["v0", "v1"]);
    assert.deepEqual(evictable({ rows: chain(4), keep: 1, active: "v3", isLocal: all }), ["v0", "v1", "v2"]);
    assert.deepEqual(evictable({ rows: chain(4), keep: 4, active: "v3", isLocal: all }), []);
    assert.deepEqual(evictable({ rows: chain(4), keep: 10, active: "v3", isLocal: all }), []);
    // The rows' order does not matter.
    assert.deepEqual(evictable({ rows: chain(4).reverse(), keep: 2, active: "v3", isLocal: all }), ["v0", "v1"]);
  });

  it("never evicts what the store does not hold: pending, failed, or kept by no store", () => {
    const rows = [cp(0, "pending"), cp(1, "failed", "v0"), cp(2, undefined, "v1"), cp(3, "replicated", "v2")];
    assert.deepEqual(evictable({ rows, keep: 1, active: "v3", isLocal: all }), []);
    // Nothing stored at all (the store unreachable since the start): nothing goes, however many.
    assert.deepEqual(evictable({ rows: chain(6, "failed"), keep: 1, active: "v5", isLocal: all }), []);
    assert.deepEqual(evictable({ rows: chain(6, "pending"), keep: 1, active: "v5", isLocal: all }), []);
  });

  it("keeps the active checkpoint (the next copy's parent, the unit's files' base)", () => {
    // The unit was restored to v1: v1 stays though it is old; v0 and v2 go.
    const rows = [...chain(4), cp(4, "replicated", "v3")];
    assert.deepEqual(evictable({ rows, keep: 2, active: "v1", isLocal: all }), ["v0", "v2"]);
  });

  it("keeps the newest stored one on the node, and the parent of each copy still to make", () => {
    // v4 and v5 are not copied yet (the store is away): v3, the newest stored, is their parent.
    const rows = [...chain(4), cp(4, "failed", "v3"), cp(5, "pending", "v4")];
    assert.deepEqual(evictable({ rows, keep: 2, active: "v5", isLocal: all }), ["v0", "v1", "v2"]);
    // A copy still to make of a checkpoint taken on v1 (a restore to v1, then a checkpoint): v1 stays.
    const restored = [...chain(4), cp(4, "pending", "v1")];
    assert.deepEqual(evictable({ rows: restored, keep: 1, active: "v4", isLocal: all }), ["v0", "v2"]);
    // The newest stored one is not on the node: the newest stored that is, is kept.
    const rows2 = chain(5);
    const local = (id: string) => id !== "v4";
    assert.deepEqual(evictable({ rows: rows2, keep: 1, active: "v4", isLocal: local }), ["v0", "v1", "v2"]);
  });

  it("names only checkpoints whose snapshot is on the node", () => {
    const local = (id: string) => id !== "v0" && id !== "v2";
    assert.deepEqual(evictable({ rows: chain(5), keep: 1, active: "v4", isLocal: local }), ["v1", "v3"]);
    assert.deepEqual(evictable({ rows: [], keep: 1, active: null, isLocal: all }), []);
  });

  it("refuses a keep that is not a whole number from 1", () => {
    for (const keep of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => evictable({ rows: chain(3), keep, active: null, isLocal: all }), RangeError);
    }
  });

  it("an export's parent: its source when stored and local, else the newest earlier one that is", () => {
    const rows = [...chain(4), cp(4, "pending", "v1"), cp(5, "pending", "v9")];
    const [four, five] = [rows[4], rows[5]] as [CheckpointRecord, CheckpointRecord];
    assert.equal(exportParent(rows, four, all), "v1");
    assert.equal(
      exportParent(rows, four, (id) => id !== "v1"),
      "v3",
    );
    assert.equal(exportParent(rows, five, all), "v3");
    assert.equal(exportParent(rows, rows[0] as CheckpointRecord, all), null);
    assert.equal(
      exportParent(rows, four, () => false),
      null,
    );
  });
});
