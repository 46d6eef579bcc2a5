// Issue #20 part 7: `ums doctor` on this host, `ums install` writing its service file, and
// `ums uninstall` after a real server with a real running unit: everything of that server gone.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { cleanupStoppedServer, prepareServe, type ServeProcess } from "@ums/server/testing";
import { tempDir, ums, umsOk } from "../testing/ums-cli.js";

/** What the host holds of runtime id `rid`: nft table, netns, routes via its veths, cgroups. */
async function hostHolds(rid: string, subnet: string): Promise<string[]> {
  const held: string[] = [];
  if (execFileSync("nft", ["list", "tables", "inet"]).toString().includes(`ums_${rid}`)) held.push("nft table");
  if (execFileSync("ip", ["netns", "list"]).toString().includes(`ums${rid}-`)) held.push("netns");
  if (execFileSync("ip", ["-4", "route", "show", "root", subnet]).toString().trim()) held.push("routes");
  for (const c of await readdir("/sys/fs/cgroup").catch(() => [] as string[])) {
    if (existsSync(join("/sys/fs/cgroup", c, `ums-${rid}`))) held.push(`cgroup ${c}`);
  }
  return held;
}

describe("ums doctor, install, uninstall", { timeout: 240_000 }, () => {
  const servers: ServeProcess[] = [];
  after(async () => {
    for (const s of servers) await s.close([], cleanupStoppedServer).catch(() => {});
  });

  it("doctor checks this host, and names a subnet another server uses", async (t) => {
    const dir = await tempDir(t);
    const subnet = "10.211.0.0/24";
    const report = JSON.parse(await umsOk(["doctor", "--json", "--data-dir", dir, "--unit-subnet", subnet]));
    const names = report.checks.map((c: { name: string }) => c.name);
    for (const n of [
      "root",
      "user namespaces",
      "btrfs",
      "cgroups",
      "runc",
      "nft",
      "nftables",
      "free space",
      "unit subnet",
      "key quota",
    ]) {
      assert.ok(names.includes(n), `no check '${n}' in ${names.join(", ")}`);
    }
    assert.equal(report.ok, true, JSON.stringify(report.checks.filter((c: { ok: boolean }) => !c.ok)));

    const a = await prepareServe({ name: "doctor-a", org: "acme" });
    servers.push(a);
    await a.start();
    const rid = (await readFile(join(a.dataDir, "runtime-id"), "utf8")).trim();
    // The start made room in the kernel's key quota for one session keyring per running unit, all
    // charged to the units' one host uid (runtime/runc/key-quota.ts; the default of 200 stopped boots).
    const maxkeys = Number((await readFile("/proc/sys/kernel/keys/maxkeys", "utf8")).trim());
    assert.ok(maxkeys >= 20_000, `kernel.keys.maxkeys is ${maxkeys} after a start`);
    const r = await ums(["doctor", "--data-dir", dir, "--unit-subnet", String(a.env.UMS_UNIT_SUBNET)]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, new RegExp(`FAIL  unit subnet: the firewall table inet ums_${rid} of another ums server`));
    assert.match(r.stdout, /fix: pass another --unit-subnet/);
  });

  it("install writes a systemd unit that restarts on failure and logs to the journal", async (t) => {
    const unitDir = await tempDir(t);
    const out = await umsOk([
      "install",
      "--unit-dir",
      unitDir,
      "--data-dir",
      "/var/lib/ums-test-install",
      "--listen",
      "0.0.0.0:7070",
      "--no-start",
    ]);
    const file = join(unitDir, "ums.service");
    assert.match(out, new RegExp(`wrote ${file}`));
    const unit = await readFile(file, "utf8");
    assert.match(
      unit,
      /^ExecStart=\/\S+\/bin\/ums serve --data-dir \/var\/lib\/ums-test-install --listen 0\.0\.0\.0:7070$/m,
    );
    assert.match(unit, /^Restart=on-failure$/m);
    assert.match(unit, /^StandardOutput=journal$/m);
    assert.match(unit, /^WantedBy=multi-user\.target$/m);
    assert.equal((await stat(file)).mode & 0o777, 0o644);
    // uninstall removes it (there is no server on that data dir).
    const un = await umsOk(["uninstall", "--yes", "--unit-dir", unitDir, "--data-dir", await tempDir(t)]);
    assert.match(un, /removed {2}the service file/);
    assert.equal(existsSync(file), false);
  });

  it("uninstall refuses while the server runs, then removes everything it put on the host", async () => {
    const s = await prepareServe({ name: "uninstall", org: "acme" });
    servers.push(s);
    await s.start();
    assert.equal((await s.api("POST", "/v1/units", { name: "doomed" })).status, 201);
    const run = await s.api("POST", "/v1/units/doomed/exec?cmd=true");
    assert.equal(run.status, 200);
    await run.arrayBuffer();
    const rid = (await readFile(join(s.dataDir, "runtime-id"), "utf8")).trim();
    const subnet = String(s.env.UMS_UNIT_SUBNET);
    const poolDir = String(s.env.UMS_POOL_DIR);
    const unitId = ((await (await s.api("GET", "/v1/units/doomed")).json()) as { id: string }).id;
    assert.ok(existsSync(join(poolDir, "units", unitId)));
    const held = await hostHolds(rid, subnet);
    for (const x of ["nft table", "netns", "routes"]) assert.ok(held.includes(x), `${x} in ${held.join(", ")}`);

    const refused = await ums(["uninstall", "--yes", "--data-dir", s.dataDir, "--pool-dir", poolDir]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, new RegExp(`ums serve \\(pid ${s.child?.pid}\\) runs on`));
    assert.deepEqual(await hostHolds(rid, subnet), held, "nothing removed");

    // Stopped, the server leaves its running unit, table and routes (so units survive a restart)...
    await s.stop("SIGTERM");
    assert.ok((await hostHolds(rid, subnet)).includes("nft table"));
    const r = await ums(["uninstall", "--yes", "--purge", "--data-dir", s.dataDir, "--pool-dir", poolDir, "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout) as { removed: string[]; left: string[] };
    assert.ok(
      report.removed.some((x) => /unit container/.test(x)),
      r.stdout,
    );
    assert.ok(report.removed.includes(`the nft table inet ums_${rid}`), r.stdout);
    assert.ok(
      report.removed.some((x) => x.startsWith("1 unit disk")),
      r.stdout,
    );
    assert.ok(
      report.left.some((x) => x.includes(poolDir)),
      r.stdout,
    );
    // ...all gone now.
    assert.deepEqual(await hostHolds(rid, subnet), []);
    assert.equal(existsSync(join(poolDir, "units", unitId)), false);
    assert.equal(existsSync(s.dataDir), false);
  });
});
