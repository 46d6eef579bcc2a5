// The pool running out of space is the user's to know and to fix (delete checkpoints or units):
// 507 UMS_POOL_FULL with what to do, never a 500, whether a host command failed directly or as
// the cause of a unit's start.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { UnitStartError } from "../node/errors.js";
import { CommandError } from "../runtime/exec/host-command.js";
import { fromNodeError } from "./node-errors.js";

const enospc = () =>
  new CommandError(
    "btrfs",
    ["subvolume", "snapshot", "-r", "/pool/units/u/rootfs", "/pool/units/u/checkpoints/v3"],
    1,
    "ERROR: cannot snapshot '/pool/units/u/rootfs': No space left on device\n",
    "",
  );

describe("a full pool", () => {
  it("answers 507 UMS_POOL_FULL, saying what to do, for a failed snapshot", () => {
    const e = fromNodeError(enospc());
    assert.equal(e?.status, 507);
    assert.equal(e?.code, ErrorCode.PoolFull);
    assert.match(e?.message ?? "", /delete checkpoints or units/);
    assert.doesNotMatch(e?.message ?? "", /\/pool\//, "no host paths in the answer");
  });

  it("and for a unit that could not start for want of space", () => {
    assert.equal(fromNodeError(new UnitStartError("web", enospc()))?.code, ErrorCode.PoolFull);
  });

  it("and for the host's own write into a unit's disk that found no space", () => {
    const write = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    assert.equal(fromNodeError(new UnitStartError("web", write))?.code, ErrorCode.PoolFull);
  });

  it("but not for other failures of host commands", () => {
    const other = new CommandError("btrfs", ["qgroup", "limit"], 1, "ERROR: invalid argument\n", "");
    assert.equal(fromNodeError(other), undefined);
    assert.equal(fromNodeError(new UnitStartError("web", other))?.code, ErrorCode.UnitUnavailable);
  });
});
