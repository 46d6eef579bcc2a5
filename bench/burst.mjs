#!/usr/bin/env node
// Issue #16 part 6, bursts: `--units` creates, each followed by its unit's first exec, all issued at
// once; then `--checkpoints` checkpoints at once, each on a different (running) unit. Each figure
// is printed with its ratio to a baseline from the same run on the same server: the same operation
// alone (sequential, `--runs` times). Goal: every request of the burst answered, total <= 10 s.
//
//   npx tsc -b && npm run build:agent && node bench/burst.mjs [--units 100] [--checkpoints 50] [--runs 5] [--json]
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
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

const USAGE = `usage: node bench/burst.mjs [--units N] [--checkpoints N] [--runs N] [--json]
  --units N        creates + first exec issued at once (default 100)
  --checkpoints N  checkpoints issued at once, on N different units (default 50, at most --units)
  --runs N         sequential runs of each baseline (default 5)
  --json           also print one JSON object with every figure`;
const flags = parseBenchFlags(USAGE, ["units", "checkpoints", "runs"]);
const UNITS = flags.units ?? 100;
const CHECKPOINTS = Math.min(flags.checkpoints ?? 50, UNITS);
const RUNS = flags.runs ?? 5;
const GOAL_TOTAL_MS = 10_000;
const log = (m) => process.stderr.write(`${m}\n`);

// Every unit of the run may run at once: the organization's limits leave room for all of them
// (the burst measures the host, not the running limit), and units beyond 64 need a wider subnet.
const running = UNITS + RUNS + 2;
const bench = await startBenchServer({
  org: "burst",
  env: {
    UMS_IDLE_WARM: "1h",
    UMS_IDLE_COLD: "1h",
  },
  limits: { running, warm: running },
  subnets: subnetsFor(running),
});
const cap = capRun(bench, 900);

const { url, auth } = bench;

const create = (name) => createUnit(bench, name);

const execTrue = (name) => execUnitTrue(bench, name);

async function checkpoint(name) {
  const r = await fetch(`${url}/v1/units/${name}/checkpoint`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ comment: "burst" }),
  });
  const text = await r.text();
  if (r.status !== 200 || !text.includes('"type":"complete"'))
    throw new Error(`checkpoint of ${name}: ${r.status} ${text}`);
}

/** CPU time the whole host spent busy so far (ms, all CPUs; /proc/stat, in USER_HZ ticks of 10 ms). */
function hostBusyMs() {
  const [, ...ticks] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  return (ticks.slice(0, 8).reduce((a, b) => a + b, 0) - idle) * 10;
}

/**
 * Where the host's CPU time went so far (ms): `server`, the ums serve process itself; `commands`,
 * the host commands it ran (runc, btrfs, ip, nft, mount, …), with the helper that starts them; `units`, everything in the
 * units' cgroups (catatonit, the agents, what they run); `host`, the whole host (other work on a
 * shared host and this client too).
 */
function cpuProfile() {
  const server = procCpuMs(bench.pid);
  // Host commands are started by ums serve's helper process (runtime/exec/spawner.ts), a live
  // child that reaps them: its own time and its reaped children's count as the server's commands,
  // as do those of its other live children (the nft shell).
  let live = 0;
  for (const child of readFileSync(`/proc/${bench.pid}/task/${bench.pid}/children`, "utf8").trim().split(/\s+/)) {
    try {
      const c = procCpuMs(child);
      live += c.own + c.reaped;
    } catch {} // it exited (and was reaped into the server's own figures)
  }
  let units = 0;
  try {
    const rid = readFileSync(join(bench.dataDir, "runtime-id"), "utf8").trim();
    units = Number(readFileSync(`/sys/fs/cgroup/cpuacct/ums-${rid}/cpuacct.usage`, "utf8")) / 1e6;
  } catch {}
  return { server: server.own, commands: server.reaped + live, units, host: hostBusyMs() };
}

/**
 * Times `op(i)` for i < n, all issued at once: each one's ms, the total, the failures, and where
 * the host's CPU time went meanwhile (cpuProfile).
 */
async function burst(n, op) {
  const cpu0 = cpuProfile();
  const t0 = performance.now();
  const results = await Promise.allSettled(
    Array.from({ length: n }, async (_, i) => {
      const t = performance.now();
      await op(i);
      return performance.now() - t;
    }),
  );
  const total = performance.now() - t0;
  const cpu1 = cpuProfile();
  const cpu = Object.fromEntries(Object.keys(cpu1).map((k) => [k, cpu1[k] - cpu0[k]]));
  const ms = results.filter((r) => r.status === "fulfilled").map((r) => r.value);
  const failed = results.filter((r) => r.status === "rejected").map((r) => String(r.reason?.message ?? r.reason));
  return { ms, total, failed, cpu };
}

/** Times `op(i)` for i < n, one after another; and where the host's CPU time went meanwhile. */
async function alone(n, op) {
  const ms = [];
  const cpu0 = cpuProfile();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await op(i);
    ms.push(performance.now() - t);
  }
  const cpu1 = cpuProfile();
  ms.cpu = Object.fromEntries(Object.keys(cpu1).map((k) => [k, cpu1[k] - cpu0[k]]));
  return ms;
}

/**
 * Times GET /healthz one after another every 20 ms until `done` settles: how long a request that
 * needs nothing but the server's event loop waits meanwhile.
 */
async function probe(done) {
  const ms = [];
  let over = false;
  void done.finally(() => {
    over = true;
  });
  while (!over) {
    const t = performance.now();
    await (await fetch(`${url}/healthz`)).arrayBuffer();
    ms.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 20));
  }
  return ms;
}

const rows = [];
const probes = [];
let failures = 0;
function report(name, b, base) {
  const p50 = percentile(b.ms, 50);
  const p99 = percentile(b.ms, 99);
  const b50 = percentile(base, 50);
  rows.push({
    name,
    count: b.ms.length + b.failed.length,
    answered: b.ms.length,
    p50,
    p99,
    total: b.total,
    baselineP50: b50,
    ratioP50: p50 / b50,
    ratioTotal: b.total / b50,
    cpuMs: b.cpu,
    baselineCpuMs: base.cpu,
    baselineCount: base.length,
  });
  failures += b.failed.length;
  for (const f of b.failed.slice(0, 5)) log(`  failed: ${f}`);
  if (b.failed.length > 5) log(`  … and ${b.failed.length - 5} more failures`);
}

try {
  // Warm-up: the first boot of a server reads the image and its caches.
  await create("warmup");
  await execTrue("warmup");

  log(`baseline: ${RUNS} × create + first exec, one after another`);
  const baseBoot = await alone(RUNS, async (i) => {
    await create(`alone-${i}`);
    await execTrue(`alone-${i}`);
  });
  log(`baseline: ${RUNS} checkpoints, one after another`);
  const baseCheckpoint = await alone(RUNS, (i) => checkpoint(`alone-${i}`));

  const idleProbe = await probe(new Promise((r) => setTimeout(r, 2000)));
  log(`burst: ${UNITS} × create + first exec at once`);
  const booting = burst(UNITS, async (i) => {
    await create(`b-${i}`);
    await execTrue(`b-${i}`);
  });
  const busyProbe = await probe(booting);
  const boots = await booting;
  probes.push({ idle: idleProbe, busy: busyProbe });
  report(`${UNITS} × create + first exec at once`, boots, baseBoot);

  log(`burst: ${CHECKPOINTS} checkpoints at once on ${CHECKPOINTS} units`);
  const checkpoints = await burst(CHECKPOINTS, (i) => checkpoint(`b-${i}`));
  report(`${CHECKPOINTS} checkpoints at once, different units`, checkpoints, baseCheckpoint);
} catch (err) {
  log(`ERROR: ${err?.stack ?? err}`);
  process.exitCode = 1;
} finally {
  log("deleting the units and stopping ums serve");
  await bench.stop().catch((e) => log(`cleanup: ${e.message}`));
  clearTimeout(cap);
}

const perOp = (r, k, cpu = r.cpuMs, count = r.count) =>
  ((k === "rest" ? cpu.host - cpu.server - cpu.commands - cpu.units : cpu[k]) / count).toFixed(0);
const split = (r, cpu, count) =>
  ["server", "commands", "units", "rest"].map((k) => perOp(r, k, cpu, count)).join(" / ");
console.log("\nums burst benchmark (baseline: the same operation alone, one after another, same server, same run)");
for (const r of rows) {
  console.log(
    `- ${r.name}: ${r.answered}/${r.count} answered  p50 ${fmt(r.p50)}  p99 ${fmt(r.p99)}  total ${fmt(r.total)}\n` +
      `    alone p50 ${fmt(r.baselineP50)}; burst p50 ${r.ratioP50.toFixed(1)}x alone, total ${r.ratioTotal.toFixed(1)}x alone\n` +
      `    host CPU busy meanwhile ${(r.cpuMs.host / 1000).toFixed(1)} s of ${((r.total / 1000) * cpus().length).toFixed(1)} s (${cpus().length} CPUs), ${perOp(r, "host")} ms per operation: ` +
      `ums serve ${perOp(r, "server")}, its host commands ${perOp(r, "commands")}, the units ${perOp(r, "units")}, the rest of the host ${perOp(r, "rest")}\n` +
      `    alone, per operation (ums serve / commands / units / rest): ${split(r, r.baselineCpuMs, r.baselineCount)} ms`,
  );
}
for (const { idle, busy } of probes) {
  const f = (ms) => `p50 ${fmt(percentile(ms, 50))}  p99 ${fmt(percentile(ms, 99))}  max ${fmt(Math.max(...ms))}`;
  console.log(
    `- GET /healthz during the boot burst (${busy.length}): ${f(busy)}\n    before it (${idle.length}): ${f(idle)}`,
  );
}
const first = rows[0];
if (first) {
  const ok = first.answered === first.count && first.total <= GOAL_TOTAL_MS;
  console.log(`goal: all answered, total <= ${GOAL_TOTAL_MS / 1000} s: ${ok ? "PASS" : "MISS"}`);
}
if (failures > 0) {
  console.log(`ERROR: ${failures} requests of the bursts failed`);
  process.exitCode = 1;
}
if (flags.json) console.log(JSON.stringify({ units: UNITS, checkpoints: CHECKPOINTS, runs: RUNS, rows }));
