// The CLI contract, through the real launcher bin/ums (testing/ums-cli.ts): every test spawns it as a
// user would, with a data dir of its own, and stops only the processes it started (by PID).

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createToken, tempDir, ums, umsOk } from "../testing/ums-cli.js";

// Every test has its own data dir, so they run side by side.
describe("ums org set-limits", { concurrency: 4 }, () => {
  it("needs at least one limit flag (exit 2)", async (t) => {
    const dir = await tempDir(t);
    const r = await ums(["org", "set-limits", "acme", "--data-dir", dir]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^ums: .*--max-units/);
    assert.equal(r.stdout, "");
  });

  it("refuses an unknown organization and limits that are not whole numbers >= 0 (exit 2)", async (t) => {
    const dir = await tempDir(t);
    const unknown = await ums(["org", "set-limits", "nope", "--max-units", "3", "--data-dir", dir]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no organization 'nope'/);
    for (const value of ["abc", "-1"]) {
      const r = await ums(["org", "set-limits", "nope", `--running-limit=${value}`, "--data-dir", dir]);
      assert.equal(r.code, 2, `${value}: ${r.stderr}`);
      assert.ok(r.stderr.includes(`--running-limit must be a whole number >= 0, got '${value}'`), r.stderr);
    }
  });

  it("prints the resulting limits; limits not given keep their value", async (t) => {
    const dir = await tempDir(t);
    await createToken(dir, "acme");
    assert.equal(
      await umsOk(["org", "set-limits", "acme", "--max-units", "2", "--data-dir", dir]),
      "acme: max-units 2, running-limit 10, warm-limit 20\n",
    );
    assert.equal(
      await umsOk(["org", "set-limits", "acme", "--warm-limit", "0", "--running-limit", "7", "--data-dir", dir]),
      "acme: max-units 2, running-limit 7, warm-limit 0\n",
    );
  });
});
