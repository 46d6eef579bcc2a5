// Issue #20, hosts shared with other software: a server refuses a unit subnet another ums server
// or a route of the host already uses, and says which; a restart of the same server is no conflict.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { cleanupStoppedServer } from "../../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../../testing/serve-process.js";
import { parseSubnet } from "./addresses.js";
import { overlaps, subnetConflicts } from "./conflicts.js";

describe("subnet conflicts (pure)", () => {
  const subnet = parseSubnet("10.209.0.0/16");
  it("overlaps compares ranges, a bare address being a /32", () => {
    assert.equal(overlaps("10.209.0.0/16", "10.209.7.0/24"), true);
    assert.equal(overlaps("10.209.7.0/24", "10.209.0.0/16"), true);
    assert.equal(overlaps("10.209.0.0/16", "10.210.0.0/16"), false);
    assert.equal(overlaps("10.0.0.0/8", "10.209.1.1"), true);
    assert.equal(overlaps("default", "10.209.0.0/16"), false);
  });
  it("the default route, the server's own units and its own guard route are not conflicts", () => {
    const host = {
      routes: [
        { dst: "default", dev: "eth0" },
        { dst: "10.209.0.0/30", dev: "uab120" },
        { dst: "10.209.0.4/30", dev: "uab121" },
        { dst: "10.209.0.0/16", type: "unreachable" },
        { dst: "192.0.2.0/24", dev: "eth0" },
      ],
      tables: [{ rid: "ab12", subnet: "10.209.0.0/16" }],
    };
    assert.deepEqual(subnetConflicts("ab12", subnet, host), []);
  });
  it("another server's table, its units' routes and a route of the host are named", () => {
    const host = {
      routes: [
        { dst: "10.209.3.0/30", dev: "ucd340" },
        { dst: "10.209.0.0/16", type: "unreachable" },
        { dst: "10.0.0.0/8", dev: "wg0" },
      ],
      tables: [{ rid: "cd34", subnet: "10.209.3.0/24" }],
    };
    const c = subnetConflicts("ab12", subnet, host);
    assert.equal(c.length, 4, c.join("\n"));
    assert.match(c[0] ?? "", /inet ums_cd34 .* guards 10\.209\.3\.0\/24/);
    assert.match(c[1] ?? "", /10\.209\.3\.0\/30 dev ucd340 belongs to another ums server \(runtime id cd34\)/);
    // The guard route of this subnet is another server's while its table claims the subnet.
    assert.match(c[2] ?? "", /unreachable 10\.209\.0\.0\/16/);
    assert.match(c[3] ?? "", /route 10\.0\.0\.0\/8 dev wg0 on this host overlaps/);
  });
});

describe("two ums servers on one host", { timeout: 240_000 }, () => {
  const servers: ServeProcess[] = [];
  after(async () => {
    for (const s of servers.reverse()) await s.close([], cleanupStoppedServer);
  });

  it("the second one on an overlapping subnet is refused with the conflict named, also once the first stopped", async () => {
    const a = await prepareServe({ name: "conflict-a", org: "acme" });
    servers.push(a);
    await a.start();
    const ridA = (await readFile(join(a.dataDir, "runtime-id"), "utf8")).trim();
    const subnetA = String(a.env.UMS_UNIT_SUBNET);
    const b = await prepareServe({ name: "conflict-b", org: "acme" });
    servers.push(b);

    // The same subnet, and a wider one around it.
    for (const subnet of [subnetA, subnetA.replace(/\.\d+\.0\/24$/, ".0.0/16")]) {
      await assert.rejects(b.start({ UMS_UNIT_SUBNET: subnet }), (err: Error) => {
        assert.match(err.message, new RegExp(`inet ums_${ridA} of another ums server`));
        assert.match(err.message, /--unit-subnet/);
        return true;
      });
      assert.equal(b.running(), false);
    }
    // Nothing of the refused server on the host: its table never came.
    const ridB = (await readFile(join(b.dataDir, "runtime-id"), "utf8").catch(() => "")).trim();
    if (ridB) {
      const { execFileSync } = await import("node:child_process");
      const tables = execFileSync("nft", ["list", "tables", "inet"]).toString();
      assert.doesNotMatch(tables, new RegExp(`ums_${ridB}\\b`));
    }

    // A stopped server keeps its table (its units survive a restart): still a conflict...
    await a.stop("SIGTERM");
    await assert.rejects(b.start({ UMS_UNIT_SUBNET: subnetA }), /of another ums server/);
    // ...but not for itself: the same data dir starts again on its subnet.
    await a.start();
    assert.equal((await a.api("GET", "/v1/units")).status, 200);
    // And the second server on a subnet of its own starts.
    await b.start();
    assert.equal((await b.api("GET", "/v1/units")).status, 200);
  });
});
