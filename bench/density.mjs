#!/usr/bin/env node
// Issue #16 part 5, density: how many idle running units this host holds, and what each costs.
// Boots `--units` units (a few at a time, each to its first exec), stopping early when the host's
// available memory falls under `--keep-free-gib` or a boot fails. Then, with all of them idle:
//
//   - memory per unit as PSS (each page shared by k processes counts 1/k: what the host pays), the
//     sum over every process of the unit (its PID 1, the agent, what they started), from
//     /proc/<pid>/smaps_rollup; and RSS, which counts shared pages once per unit;
//   - host CPU spent while they idle for `--idle-seconds`: the units' cgroups and ums serve (with
//     the commands it ran), as % of one core; the whole host's busy time is printed beside it;
//   - the API's list page (GET /v1/units?max_results=50) p50 and exec of `true` p50, each against
//     the same measured at the start with one unit running (the empty host; its org already has
//     the 50 units of a full page, cold), ratio goal <= 2x.
//
// Goals: PSS <= 16 MB per unit, 300 units, list and exec p50 within 2x of the empty host, idle CPU
// <= 5% of one core.
//
//   npx tsc -b && npm run build:agent && node bench/density.mjs [--units 300] [--at-once 4] [--idle-seconds 30] [--keep-free-gib 3] [--json]
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  capRun,
  createUnit,
  execTrue as execUnitTrue,
  fmt,
  parseBenchFlags,
  percentile,
  procCpuMs,
  startBenchServer,
  subnetsFor,
} from "./lib.mjs";

const USAGE = `usage: node bench/density.mjs [--units N] [--at-once N] [--idle-seconds N] [--keep-free-gib N] [--json]
  --units N          units to boot (default 300)
  --at-once N        boots in flight at a time (default 4)
  --idle-seconds N   how long the idle CPU is measured (default 30)
  --keep-free-gib N  stop booting when the host's available memory falls under this (default 3)
  --json             also print one JSON object with every figure`;
const flags = parseBenchFlags(USAGE, ["units", "at-once", "idle-seconds", "keep-free-gib"]);
const UNITS = flags.units ?? 300;
const AT_ONCE = flags["at-once"] ?? 4;
const IDLE_S = flags["idle-seconds"] ?? 30;
const KEEP_FREE = (flags["keep-free-gib"] ?? 3) * 1024 ** 3;
const GOAL_PSS_MB = 16;
const GOAL_RATIO = 2;
const GOAL_CPU_PCT = 5;
const log = (m) => process.stderr.write(`${m}\n`);

const running = UNITS + 2;
const bench = await startBenchServer({
  org: "density",
  // Units stay running: idle units do not warm or cool during the run.
  env: { UMS_IDLE_WARM: "2h", UMS_IDLE_COLD: "2h", UMS_LOG_LEVEL: "warn" },
  limits: { running, warm: running },
  subnets: subnetsFor(running),
});
capRun(bench, 1800);
const { url, auth } = bench;
const rid = readFileSync(join(bench.dataDir, "runtime-id"), "utf8").trim();

const create = (name) => createUnit(bench, name);

const execTrue = (name) => execUnitTrue(bench, name);

async function listPage() {
  const r = await fetch(`${url}/v1/units?max_results=50`, { headers: auth });
  await r.arrayBuffer();
  if (r.status !== 200) throw new Error(`list: ${r.status}`);
}

async function timeMany(n, op) {
  const ms = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await op(i);
    ms.push(performance.now() - t);
  }
  return ms;
}

const memAvailable = () => Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0) * 1024;

/** Every process of a unit: the pids in its cgroup (memory controller, cgroup v1 or v2). */
function unitPids(id) {
  for (const dir of [`/sys/fs/cgroup/memory/ums-${rid}/${id}`, `/sys/fs/cgroup/ums-${rid}/${id}`]) {
    try {
      const pids = new Set();
      const walk = (d) => {
        for (const p of readFileSync(join(d, "cgroup.procs"), "utf8").split("\n").filter(Boolean)) pids.add(Number(p));
        for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
      };
      walk(dir);
      return [...pids];
    } catch {}
  }
  return [];
}

function memoryOf(pids) {
  let pss = 0;
  let rss = 0;
  for (const pid of pids) {
    try {
      const t = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
      const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(t)?.[1] ?? 0);
      pss += kb("Pss");
      rss += kb("Rss");
    } catch {} // it exited
  }
  return { pss: pss / 1024, rss: rss / 1024 };
}

/** CPU time (ms) so far of the units' cgroups, ums serve and its reaped commands, and the whole host. */
function cpuNow() {
  const times = procCpuMs(bench.pid);
  const server = times.own + times.reaped;
  // The units' parent cgroup (cgroup v1 cpuacct, else v2 cpu.stat); NaN when neither is readable.
  let units = Number.NaN;
  try {
    units = Number(readFileSync(`/sys/fs/cgroup/cpuacct/ums-${rid}/cpuacct.usage`, "utf8")) / 1e6;
  } catch {
    try {
      const t = readFileSync(`/sys/fs/cgroup/ums-${rid}/cpu.stat`, "utf8");
      units = Number(/usage_usec (\d+)/.exec(t)?.[1] ?? Number.NaN) / 1000;
    } catch {}
  }
  const [, ...ticks] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
  const host = (ticks.slice(0, 8).reduce((a, b) => a + b, 0) - ticks[3] - ticks[4]) * 10;
  return { server, units, host };
}

const ids = new Map();
let stopReason = `all ${UNITS} booted`;
const out = {};
try {
  // The empty host: one unit running, and a full list page (50 units made, cold).
  const name = (i) => `d-${String(i).padStart(4, "0")}`;
  const PAGE = Math.min(50, UNITS);
  for (let i = 0; i < PAGE; i++) ids.set(name(i), await create(name(i)));
  await execTrue("d-0000");
  const emptyExec = await timeMany(100, () => execTrue("d-0000"));
  const emptyList = await timeMany(100, listPage);
  log(`empty host: exec p50 ${fmt(percentile(emptyExec, 50))}, list p50 ${fmt(percentile(emptyList, 50))}`);

  // Boot the rest, AT_ONCE at a time, while the host keeps KEEP_FREE available.
  const bootMs = [];
  let next = 1;
  let failed;
  const t0 = performance.now();
  async function worker() {
    while (next < UNITS && !failed) {
      if (memAvailable() < KEEP_FREE) {
        failed ??= `the host's available memory fell under ${KEEP_FREE / 1024 ** 3} GiB`;
        return;
      }
      const n = name(next++);
      const t = performance.now();
      try {
        if (!ids.has(n)) ids.set(n, await create(n));
        await execTrue(n);
        bootMs.push(performance.now() - t);
      } catch (err) {
        failed ??= `${n}: ${err.message}`;
        return;
      }
      if (bootMs.length % 25 === 0) {
        log(
          `${bootMs.length + 1} units running (${((performance.now() - t0) / 1000).toFixed(0)} s, ${(memAvailable() / 1024 ** 3).toFixed(1)} GiB available)`,
        );
      }
    }
  }
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  if (failed) stopReason = `stopped: ${failed}`;
  const reached = bootMs.length + 1;
  log(`${reached} units running; ${stopReason}`);

  // Settle, then measure everything idle.
  await new Promise((r) => setTimeout(r, 10_000));
  const booted = [...ids].filter(([n]) => n === "d-0000" || Number(n.slice(2)) < next).map(([, id]) => id);
  const mem = booted.map((id) => memoryOf(unitPids(id))).filter((m) => m.rss > 0);
  const pss = mem.map((m) => m.pss);
  const rss = mem.map((m) => m.rss);
  const c0 = cpuNow();
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  const c1 = cpuNow();
  const pct = (k) => ((c1[k] - c0[k]) / (IDLE_S * 1000)) * 100;
  const names = [...ids.keys()].slice(0, reached);
  const fullExec = await timeMany(100, (i) => execTrue(names[(i * 37) % names.length]));
  const fullList = await timeMany(100, listPage);

  const sum = (a) => a.reduce((x, y) => x + y, 0);
  Object.assign(out, {
    unitsRunning: reached,
    stopReason,
    bootP50Ms: percentile(bootMs, 50),
    pssPerUnitMb: { p50: percentile(pss, 50), mean: sum(pss) / pss.length },
    rssPerUnitMb: { p50: percentile(rss, 50), mean: sum(rss) / rss.length },
    idleCpuPctOfOneCore: { units: pct("units"), server: pct("server"), host: pct("host") },
    exec: { emptyP50: percentile(emptyExec, 50), fullP50: percentile(fullExec, 50) },
    list: { emptyP50: percentile(emptyList, 50), fullP50: percentile(fullList, 50) },
  });
  const verdict = (ok) => (ok ? "PASS" : "MISS");
  const idleCpu = out.idleCpuPctOfOneCore.units + out.idleCpuPctOfOneCore.server;
  const execRatio = out.exec.fullP50 / out.exec.emptyP50;
  const listRatio = out.list.fullP50 / out.list.emptyP50;
  console.log(
    `density: ${reached} idle running units (${stopReason}); boots ${AT_ONCE} at a time, p50 ${fmt(out.bootP50Ms)}`,
  );
  console.log(
    `memory per unit: PSS p50 ${out.pssPerUnitMb.p50.toFixed(1)} MB (mean ${out.pssPerUnitMb.mean.toFixed(1)}), RSS p50 ${out.rssPerUnitMb.p50.toFixed(1)} MB: goal PSS <= ${GOAL_PSS_MB} MB: ${verdict(out.pssPerUnitMb.p50 <= GOAL_PSS_MB)}`,
  );
  console.log(
    `idle CPU over ${IDLE_S} s: units ${out.idleCpuPctOfOneCore.units.toFixed(2)}% + ums serve ${out.idleCpuPctOfOneCore.server.toFixed(2)}% of one core (whole host, other work included: ${out.idleCpuPctOfOneCore.host.toFixed(1)}%): goal <= ${GOAL_CPU_PCT}%: ${verdict(idleCpu <= GOAL_CPU_PCT)}`,
  );
  console.log(
    `exec p50: ${fmt(out.exec.fullP50)} vs ${fmt(out.exec.emptyP50)} with one unit (${execRatio.toFixed(2)}x): goal <= ${GOAL_RATIO}x: ${verdict(execRatio <= GOAL_RATIO)}`,
  );
  console.log(
    `list page p50: ${fmt(out.list.fullP50)} vs ${fmt(out.list.emptyP50)} with one unit (${listRatio.toFixed(2)}x): goal <= ${GOAL_RATIO}x: ${verdict(listRatio <= GOAL_RATIO)}`,
  );
  console.log(`units: goal 300: ${verdict(reached >= 300)}`);
  if (process.argv.includes("--json")) console.log(JSON.stringify(out));
} finally {
  log("deleting the units and stopping ums serve");
  await bench.stop().catch((e) => log(`cleanup: ${e.message}`));
}
