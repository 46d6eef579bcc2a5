import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CheckpointRecord } from "../store/records.js";
import { newestStored } from "./rehome.js";

const cp = (id: string, sourceId: string | null, state?: "pending" | "replicated" | "failed"): CheckpointRecord => ({
  unitId: "u",
  id,
  seq: Number(id.slice(1)),
  comment: "",
  sourceId,
  createdAt: "2026-11-29T00:00:00.000Z",
  auto: false,
  resources: "{}",
  privileges: "{}",
  network: '{"rules":[]}',
  ...(state && { replica: { state } }),
});

describe("newestStored (issue #15, ums node drain --from-store)", () => {
  it("is the active checkpoint when the store holds it, else the newest stored one it descends from", () => {
    const line = [cp("v0", null, "replicated"), cp("v1", "v0", "replicated"), cp("v2", "v1", "pending")];
    assert.equal(newestStored({ activeCheckpoint: "v1" }, line)?.id, "v1");
    assert.equal(newestStored({ activeCheckpoint: "v2" }, line)?.id, "v1");
    assert.equal(
      newestStored({ activeCheckpoint: "v2" }, [
        ...line.slice(0, 1),
        cp("v1", "v0", "failed"),
        line[2] as CheckpointRecord,
      ])?.id,
      "v0",
    );
  });

  it("follows the line the unit's files are on, not the newest checkpoint: after a restore, the backup taken before it is not that line", () => {
    // v0, v1 stored; restoring v0 took the backup v2 (of v1's line) first; the unit is on v0 now.
    const cps = [cp("v0", null, "replicated"), cp("v1", "v0", "replicated"), cp("v2", "v1", "replicated")];
    assert.equal(newestStored({ activeCheckpoint: "v0" }, cps)?.id, "v0");
    // A checkpoint taken after the restore, not stored yet: back to v0.
    assert.equal(newestStored({ activeCheckpoint: "v3" }, [...cps, cp("v3", "v0", "pending")])?.id, "v0");
  });

  it("is nothing when the unit has no checkpoint, none of its line is stored, or the line is broken", () => {
    assert.equal(newestStored({ activeCheckpoint: null }, []), undefined);
    assert.equal(newestStored({ activeCheckpoint: "v1" }, [cp("v0", null), cp("v1", "v0", "pending")]), undefined);
    assert.equal(newestStored({ activeCheckpoint: "v1" }, [cp("v1", "v0", "failed")]), undefined);
    assert.equal(newestStored({ activeCheckpoint: "v0" }, [cp("v0", "v1"), cp("v1", "v0")]), undefined);
  });
});
