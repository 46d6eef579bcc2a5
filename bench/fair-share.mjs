#!/usr/bin/env node
// Fair-share benchmark (issue #19 finding 9): one unit storms (CPU burners and fork bombs at its
// pids limit) while another unit and the API are measured. Each figure is the p50 under the storm
// with its ratio to the same p50 idle, in the same run:
//   unit B exec     `true` through POST /v1/units/b/exec (the other unit's agent and the server)
//   API list        GET /v1/units
//   host spawn      `true` spawned by a host process outside any unit
// Idle and storm are measured in alternating windows of 1.5 s (idle: the storm's cgroup frozen, so
// it takes no CPU), so that other load on the host weighs on both alike; the idle p50 before the
// storm is printed too. Then how long a DELETE of the storming unit takes and whether its cgroup
// is gone.
// The units have the server's default limits (`ums serve` defaults: 1,024 pids, 1 core).
//
//   npx tsc -b && npm run build:agent && node bench/fair-share.mjs [--seconds 20] [--n 20]
//
// The storm is bounded: by the unit's pids and CPU limits, by the DELETE at the end (also on
// error), and by itself: it stops after --seconds + 60 s even if this script dies.
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { fmt, percentile, startBenchServer, timeIt } from "./lib.mjs";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) || dflt : dflt;
};
const SECONDS = arg("--seconds", 20);
const N = arg("--n", 20);
const { execHttp } = await import("../packages/server/dist/testing/exec-client.js");

const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const { url, token, auth } = bench;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function create(name) {
  const r = await fetch(`${url}/v1/units`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name }),
  });
  if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${await r.text()}`);
  const id = (await r.json()).id;
  const boot = await execHttp(url, token, name, ["true"]);
  if (boot.exitCode !== 0) throw new Error(`boot ${name}: ${boot.status} ${boot.body}`);
  return id;
}

function cgroup(controller, id) {
  const root = `/sys/fs/cgroup/${controller}`;
  const parent = readdirSync(root).find((p) => p.startsWith("ums-") && existsSync(`${root}/${p}/${id}`));
  return parent && `${root}/${parent}/${id}`;
}

const probes = {
  "unit B exec": async () => {
    const r = await execHttp(url, token, "b", ["true"]);
    if (r.exitCode !== 0) throw new Error(`exec in b: ${r.status} ${r.body}`);
  },
  "API list": async () => {
    const r = await fetch(`${url}/v1/units`, { headers: auth });
    if (r.status !== 200) throw new Error(`list: ${r.status}`);
    await r.arrayBuffer();
  },
  "host spawn": () => new Promise((resolve, reject) => execFile("true", (err) => (err ? reject(err) : resolve()))),
};

const newSamples = () => Object.fromEntries(Object.keys(probes).map((k) => [k, []]));
const summary = (samples) =>
  Object.fromEntries(Object.entries(samples).map(([k, s]) => [k, { p50: percentile(s, 50), n: s.length }]));
const enough = (samples) => Object.values(samples).every((s) => s.length >= N);

/** Takes the probes in turn into `samples` until `ms` passed (and each has N samples when `fill`). */
async function sample(samples, ms, fill = true) {
  const end = performance.now() + ms;
  while (performance.now() < end || (fill && !enough(samples))) {
    for (const [k, probe] of Object.entries(probes)) samples[k].push(await timeIt(probe));
  }
  return samples;
}

async function freeze(freezer, frozen) {
  writeFileSync(`${freezer}/freezer.state`, frozen ? "FROZEN" : "THAWED");
  for (let i = 0; frozen && readFileSync(`${freezer}/freezer.state`, "utf8").trim() !== "FROZEN"; i++) {
    if (i > 200) throw new Error("the storm did not freeze in 10 s");
    await sleep(50);
  }
}

const STORM = [
  "S=/tmp/storm.stop; rm -f $S",
  `(sleep ${SECONDS + 60}; : > $S) &`,
  "for i in 1 2 3 4; do (while [ ! -e $S ]; do :; done) & done",
  "f() { [ -e $S ] || { f | f & }; }; f",
  "perl -e 'until (-e $ARGV[0]) { fork }' $S &",
  "exit 0",
].join("\n");

let ok = true;
const rows = [];
let stormUp = false;
/** Once, whoever comes first (the end of the run or a signal): the storm's unit, then the rest. */
let cleaning;
const cleanup = () =>
  (cleaning ??= (async () => {
    if (stormUp) await fetch(`${url}/v1/units/a`, { method: "DELETE", headers: auth }).catch(() => {});
    await bench.stop().catch((err) => console.error(err));
  })());
// Ctrl-C (or a kill) cleans up like the end of a run: units outlive `ums serve`.
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.once(sig, () => {
    process.stderr.write(`${sig}: deleting the units\n`);
    cleanup().finally(() => process.exit(130));
  });
}
try {
  const aId = await create("a");
  await create("b");
  const pids = cgroup("pids", aId);
  await sample(newSamples(), 0); // warm-up
  const before = summary(await sample(newSamples(), 0));

  process.stderr.write("storm: starting in unit a\n");
  stormUp = true;
  await execHttp(url, token, "a", ["sh", "-c", STORM], { user: "root" });
  const fillStart = performance.now();
  while (!/^max [1-9]/m.test(readFileSync(`${pids}/pids.events`, "utf8"))) {
    if (performance.now() - fillStart > 60_000) throw new Error("the storm did not reach the pids limit in 60 s");
    await sleep(100);
  }
  const tasks = readFileSync(`${pids}/pids.current`, "utf8").trim();
  process.stderr.write(`storm: ${tasks} tasks after ${((performance.now() - fillStart) / 1000).toFixed(1)} s\n`);
  const freezer = cgroup("freezer", aId);
  const idleS = newSamples();
  const busyS = newSamples();
  const end = performance.now() + SECONDS * 1000;
  for (let round = 0; performance.now() < end || !enough(idleS) || !enough(busyS); round++) {
    const into = round % 2 === 0 ? idleS : busyS;
    await freeze(freezer, into === idleS);
    await sleep(250);
    await sample(into, 1500, false);
  }
  await freeze(freezer, false);
  const idle = summary(idleS);
  const busy = summary(busyS);
  const shares = readFileSync(`${cgroup("cpu", aId)}/cpu.shares`, "utf8").trim();
  const peak = readFileSync(`${pids}/pids.current`, "utf8").trim();

  const start = performance.now();
  const del = await fetch(`${url}/v1/units/a`, { method: "DELETE", headers: auth });
  const deleteMs = performance.now() - start;
  stormUp = del.status !== 204;
  if (del.status !== 204) throw new Error(`delete a: ${del.status}`);

  for (const k of Object.keys(probes)) {
    const ratio = busy[k].p50 / idle[k].p50;
    rows.push(
      `- ${k.padEnd(12)} idle p50 ${fmt(idle[k].p50)} (n ${idle[k].n}; before the storm ${fmt(before[k].p50)})  storm p50 ${fmt(busy[k].p50)} (n ${busy[k].n})  ${ratio.toFixed(2)}x  [goal <= 3x: ${ratio <= 3 ? "PASS" : "MISS"}]`,
    );
  }
  rows.push(
    `- storm: ${tasks} tasks at the limit, ${peak} at the end of ${SECONDS} s; its cpu.shares ${shares} (a calm unit's: 1024)`,
    `- DELETE of the storming unit: ${fmt(deleteMs)}; its cgroup ${existsSync(pids) ? "is STILL THERE" : "is gone"}  [goal <= 5 s: ${deleteMs <= 5000 && !existsSync(pids) ? "PASS" : "MISS"}]`,
  );
} catch (err) {
  console.error(err);
  ok = false;
} finally {
  await cleanup();
}
console.log("\nums fair-share benchmark (ratios: p50 under the storm / p50 idle, same host, same run)");
for (const row of rows) console.log(row);
if (!ok) process.exitCode = 1;
