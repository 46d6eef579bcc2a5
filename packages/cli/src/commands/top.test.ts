// `ums top`: the running units' latest usage and one unit's history (issue #17), against a real
// server; the samples are put in its store (the sampler itself is tested in the server package).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startUserCli, type UserCli } from "../testing/user-cli.js";
import { humanBytes } from "./top.js";

describe("ums top", () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
    const token = await cli.token("top-org");
    await cli.ok(["login", "--url", cli.server.url, "--token", token]);
  });
  after(async () => {
    await cli?.close();
  });

  it("prints a unit's samples as a table and as --json; refuses another window; the running units' latest", async () => {
    await cli.ok(["create", "topped"]);
    await cli.ok(["exec", "topped", "--", "true"]); // it runs now
    const unit = await cli.server.server.store.units.get(
      (await cli.server.server.store.orgs.getBySlug("top-org"))?.id ?? "",
      "topped",
    );
    assert.ok(unit);
    const now = Date.now();
    const sample = (at: number, cpu: number) => ({
      at,
      cpuCores: cpu,
      memoryBytes: 150 * 1024 * 1024,
      memoryPeakBytes: 200 * 1024 * 1024,
      memoryLimitBytes: 1024 * 1024 * 1024,
      diskBytes: 5 * 1024 * 1024,
      diskLimitBytes: 10 * 1024 * 1024 * 1024,
      netRxBps: 2048,
      netTxBps: 0,
      pids: 4,
    });
    await cli.server.server.store.usage.add(10, [
      { unitId: unit.id, sample: sample(now - 20_000, 0.25) },
      { unitId: unit.id, sample: sample(now - 10_000, 0.5) },
    ]);
    const text = await cli.ok(["top", "topped"]);
    const lines = text.trimEnd().split("\n");
    assert.match(lines[0] ?? "", /^AT\s+CPU\s+MEMORY\s+DISK\s+NET IN\s+NET OUT\s+PROCS$/);
    assert.equal(lines.length, 3);
    assert.match(lines[2] ?? "", /0\.50\s+150M\/1\.0G\s+5\.0M\/10G\s+2\.0K\/s\s+0B\/s\s+4$/);
    const json = JSON.parse(await cli.ok(["top", "topped", "--json", "--limit", "1"]));
    assert.equal(json.window, "1h");
    assert.equal(json.samples.length, 1);
    assert.equal(json.samples[0].cpuCores, 0.5);
    const bad = await cli.run(["top", "topped", "--window", "2h"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /1h, 24h or 7d/);
    const all = await cli.ok(["top"]);
    assert.match(all, /^NAME\s+CPU/);
    assert.match(all, /\ntopped\s+0\.50\s/);
    const missing = await cli.run(["top", "ghost"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /UMS_UNIT_NOT_FOUND/);
  });

  it("sizes in powers of 1024", () => {
    assert.deepEqual([0, 1023, 1536, 10 * 1024 * 1024, 3 * 2 ** 40, null].map(humanBytes), [
      "0B",
      "1023B",
      "1.5K",
      "10M",
      "3.0T",
      "-",
    ]);
  });
});
