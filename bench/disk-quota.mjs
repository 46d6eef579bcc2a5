#!/usr/bin/env node
// Disk quota benchmark (issue 20, part 4): a unit's disk size as measured inside the unit, against
// the size configured for it (its resources policy's disk.limit_mb) in the same run. For each size
// a fresh unit is given that limit and writes random (incompressible) data until the kernel refuses
// (EDQUOT). Measured: what the unit had been charged before (files written at boot, from its
// quota group on the host) plus what it wrote. Goal: within 5 % of the configured size.
//
//   npx tsc -b && npm run build:agent && node bench/disk-quota.mjs [--mib 256,1024]
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { listQgroups } from "../packages/server/dist/runtime/storage/btrfs.js";
import { startBenchServer } from "./lib.mjs";

const at = process.argv.indexOf("--mib");
const SIZES = (at > 0 ? (process.argv[at + 1] ?? "") : "256,1024")
  .split(",")
  .map(Number)
  .filter((n) => Number.isInteger(n) && n >= 128);
const MiB = 1024 * 1024;
const bench = await startBenchServer();
const { url, auth } = bench;
const api = (method, path, body) =>
  fetch(url + path, {
    method,
    headers: { ...auth, "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
/** A shell command in the unit as root; its stdout (the exec stream's stdout frames). */
const sh = async (unit, script) => {
  const q = ["sh", "-c", script].map((c) => `cmd=${encodeURIComponent(c)}`).join("&");
  const res = await fetch(`${url}/v1/units/${unit}/exec?${q}&user=root`, { method: "POST", headers: auth });
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`exec: ${res.status} ${body}`);
  // Pipe frames are [stream id, …bytes] per HTTP chunk; the text is all this script needs.
  return body.toString("latin1");
};
/** What the unit's quota group has been charged, from the host. */
const charged = async (id) => {
  execFileSync("btrfs", ["filesystem", "sync", bench.pool]);
  const group = readFileSync(join(bench.pool, "units", id, "qgroup"), "utf8").trim();
  const found = (await listQgroups(bench.pool)).find((g) => g.id === group);
  if (!found) throw new Error(`no quota group ${group}`);
  return found.referenced;
};

const rows = [];
let ok = true;
try {
  for (const mib of SIZES) {
    const name = `quota-${mib}`;
    const created = await api("POST", "/v1/units", { name });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
    const { id } = await created.json();
    const set = await api("POST", `/v1/units/${name}/policy/resources`, { disk: { limit_mb: mib } });
    if (set.status !== 200) throw new Error(`limit: ${set.status} ${await set.text()}`);
    await sh(name, "true");
    const before = await charged(id);
    const started = performance.now();
    const out = await sh(
      name,
      `dd if=/dev/urandom of=/root/fill bs=1M count=${mib * 2} 2>&1; sync; echo "size=$(stat -c %s /root/fill)"`,
    );
    const seconds = (performance.now() - started) / 1000;
    const written = Number(/size=(\d+)/.exec(out)?.[1]);
    const refused = /Disk quota exceeded/.test(out);
    const measured = before + written;
    const ratio = measured / (mib * MiB);
    const within = refused && Math.abs(ratio - 1) <= 0.05;
    rows.push(
      `- disk.limit_mb ${mib}: measured in the unit ${(measured / MiB).toFixed(1)} MiB = ${(ratio * 100).toFixed(1)} % of the configured size ` +
        `(charged before ${(before / MiB).toFixed(1)} MiB + written ${(written / MiB).toFixed(1)} MiB in ${seconds.toFixed(1)} s, ` +
        `${refused ? "then EDQUOT" : "NOT refused"})  [goal within 5 %: ${within ? "PASS" : "MISS"}]`,
    );
    await api("DELETE", `/v1/units/${name}`);
  }
} catch (err) {
  console.error(err);
  ok = false;
} finally {
  await bench.stop().catch((err) => console.error(err));
}
console.log("\nums disk quota benchmark (ratio: measured in the unit / configured size, same run)");
for (const row of rows) console.log(row);
if (!ok) process.exitCode = 1;
