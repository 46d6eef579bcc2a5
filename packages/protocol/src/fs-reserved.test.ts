import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isReservedPath, normalizeAbsolute } from "./fs-reserved.js";

describe("the /.unit rule of the filesystem API", () => {
  it("normalises absolute paths as the kernel would without symlinks", () => {
    assert.equal(normalizeAbsolute("//.unit/./run//agent.sock/"), "/.unit/run/agent.sock");
    assert.equal(normalizeAbsolute("/a/../../.unit"), "/.unit");
    assert.equal(normalizeAbsolute("/"), "/");
    assert.equal(normalizeAbsolute("/.unit/.."), "/");
  });

  it("refuses /.unit and everything below it, however spelled", () => {
    for (const p of ["/.unit", "/.unit/", "//.unit", "/./.unit/run", "/x/../.unit/run/host.sock", "/.unit/api.sock"]) {
      assert.equal(isReservedPath(p, "read"), true, p);
      assert.equal(isReservedPath(p, "write"), true, p);
    }
  });

  it("lets the logs, checkpoints and policy be read, never written", () => {
    for (const p of [
      "/.unit/logs",
      "/.unit/logs/services/web.log",
      "/.unit/checkpoints/v1/etc",
      "/.unit/policy/network.json",
    ]) {
      assert.equal(isReservedPath(p, "read"), false, p);
      assert.equal(isReservedPath(p, "write"), true, p);
    }
  });

  it("leaves everything else alone, names that only look alike too", () => {
    for (const p of ["/", "/.unitx", "/.units/run", "/home/unit/.unit", "/tmp/.unit/run", "/.unit-logs", "/%2eunit"]) {
      assert.equal(isReservedPath(p, "write"), false, p);
    }
    // `..` is resolved before the rule: a path that leaves /.unit is not in it.
    assert.equal(isReservedPath("/.unit/../tmp", "write"), false);
    assert.equal(isReservedPath("/.unit/logs/../run", "read"), true);
    assert.equal(isReservedPath("/.unit/logsx", "read"), true);
  });
});
