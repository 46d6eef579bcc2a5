#!/usr/bin/env node
// Observability benchmark (issue #17): what Prometheus metrics and the per-unit usage sampler cost.
//
// Part 1: three servers in one run: metrics on, metrics off (--no-metrics, UMS_METRICS=off) and a
// second "off" as an A/A control (its difference from the first "off" is the run's noise). Rounds
// interleave them (the order rotates each round); each round times sequential HTTP exec `true`
// and list pages (`GET /v1/units?max_results=50` of 100 units) on one keep-alive connection per
// server. Printed: each p50 with its ratio to the "off" server's p50 (goal: on <= 1.03x), the A/A
// ratio (a run is meaningful when it is within 0.985-1.015x), and each server's idle CPU.
// Part 2: `--units N` running units on a metrics server; the sampler's own CPU (its counter
// ums_usage_sampler_cpu_seconds_total) as % of a core (goal <= 2 %), and the whole server's CPU.
//
//   npx tsc -b && npm run build:agent && node bench/observability.mjs [--rounds 20] [--n 50] [--units 200]
//
// Many running units need the kernel's key quota raised (runc's session keyring per container is
// charged to the units' one host uid; default kernel.keys.maxkeys=200): the run says when it is low.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import { arg, fmt, percentile, startBenchServer, UMS } from "./lib.mjs";

const ROUNDS = arg("rounds", 20);
const N = arg("n", 50);
const UNITS = arg("units", 200);
const IDLE_S = arg("idle", 20);
const SAMPLE_S = arg("sample-window", 60);
const BOOT_MINUTES = arg("boot-minutes", 15);
const PART1 = !process.argv.includes("--part2-only");
// A bench server's test subnet is a /24: 64 units' /30 links. More running units need a larger one
// (`--subnet 10.212.0.0/22`; the server refuses one that overlaps the host's networks).
const si = process.argv.indexOf("--subnet");
const SUBNET = si > 0 ? process.argv[si + 1] : undefined;

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function request(base, token, method, path, body) {
  return new Promise((resolve, reject) => {
    const u = new URL(path, base);
    const req = http.request(
      u,
      {
        method,
        agent,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined && { "content-type": "application/json" }),
        },
      },
      (res) => {
        const parts = [];
        res.on("data", (d) => parts.push(d));
        res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(parts) }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

async function timed(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

const servers = [];
const rows = [];
let ok = true;
const stopAll = () => Promise.allSettled(servers.map((s) => s.stop()));
const capMs = (Number(process.env.UMS_BENCH_TIMEOUT_S) || 1800) * 1000;
const cap = setTimeout(() => {
  console.error("time cap reached: cleaning up");
  void stopAll().finally(() => process.exit(1));
}, capMs);
cap.unref();

try {
  // ---- Part 1 ----
  if (PART1) await part1();
  // ---- Part 2 ----
  if (UNITS > 0) await part2();
} catch (err) {
  console.error(err);
  ok = false;
} finally {
  await stopAll();
}
console.log("\nums observability benchmark (ratios: p50 / the metrics-off server's p50, same run, interleaved)");
for (const row of rows) console.log(row);
console.log(`load: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
if (!ok) process.exitCode = 1;

async function part1() {
  const kinds = [
    { name: "metrics on", env: { UMS_METRICS: "on" } },
    { name: "metrics off", env: { UMS_METRICS: "off" } },
    { name: "metrics off (A/A)", env: { UMS_METRICS: "off" } },
  ];
  for (const k of kinds) {
    const s = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h", ...k.env } });
    servers.push({ ...s, kind: k.name, exec: [], list: [] });
  }
  process.stderr.write("servers up; making units\n");
  for (const s of servers) {
    const r = await request(s.url, s.token, "POST", "/v1/units", { name: "b" });
    if (r.status !== 201) throw new Error(`create: ${r.status} ${r.body}`);
    for (let i = 0; i < 100; i++) {
      const c = await request(s.url, s.token, "POST", "/v1/units", { name: `l-${String(i).padStart(3, "0")}` });
      if (c.status !== 201) throw new Error(`create: ${c.status} ${c.body}`);
    }
  }
  const exec = (s) =>
    request(s.url, s.token, "POST", "/v1/units/b/exec?cmd=true").then((r) => {
      if (r.status !== 200 || r.body.at(-2) !== 3 || r.body.at(-1) !== 0) throw new Error(`exec: ${r.status}`);
    });
  const list = (s) =>
    request(s.url, s.token, "GET", "/v1/units?max_results=50").then((r) => {
      if (r.status !== 200) throw new Error(`list: ${r.status}`);
    });
  // Warm-up.
  for (const s of servers) {
    for (let i = 0; i < 20; i++) {
      await exec(s);
      await list(s);
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = servers.map((_, i) => servers[(i + round) % servers.length]);
    for (const s of order) {
      for (let i = 0; i < N; i++) s.exec.push(await timed(() => exec(s)));
      for (let i = 0; i < N; i++) s.list.push(await timed(() => list(s)));
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
  }
  // Idle CPU: the units run, nothing is asked.
  const cpu0 = servers.map((s) => cpuSeconds(s.pid));
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  const idle = servers.map((s, i) => ((cpuSeconds(s.pid) - cpu0[i]) / IDLE_S) * 100);

  const [on, off, aa] = servers;
  const line = (label, pick) => {
    const pOn = percentile(pick(on), 50);
    const pOff = percentile(pick(off), 50);
    const pAa = percentile(pick(aa), 50);
    const r = pOn / pOff;
    rows.push(
      `- ${label} p50: on ${fmt(pOn)} = ${r.toFixed(3)}x off (${fmt(pOff)})  [goal <= 1.03x: ${r <= 1.03 ? "PASS" : "MISS"}]` +
        `;  A/A control ${fmt(pAa)} = ${(pAa / pOff).toFixed(3)}x off [${Math.abs(pAa / pOff - 1) <= 0.015 ? "quiet run" : "NOISY run"}]`,
    );
  };
  line(`exec true (${ROUNDS * N} each)`, (s) => s.exec);
  line(`list page of 50 (${ROUNDS * N} each)`, (s) => s.list);
  rows.push(
    `- idle CPU over ${IDLE_S} s (one running unit each): ${servers.map((s, i) => `${s.kind} ${idle[i].toFixed(2)} %`).join(", ")} of a core`,
  );
  const text = (await request(on.url, on.token, "GET", "/metrics")).body.toString();
  rows.push(
    `- exposition size: ${text.length} bytes, ${text.split("\n").filter((l) => l && !l.startsWith("#")).length} samples`,
  );
  await stopAll();
  servers.length = 0;
}

async function part2() {
  {
    const maxkeys = Number(readFileSync("/proc/sys/kernel/keys/maxkeys", "utf8"));
    if (maxkeys < UNITS * 3) {
      rows.push(
        `- ${UNITS} running units need kernel.keys.maxkeys >= ~${UNITS * 3} (it is ${maxkeys}): sysctl -w kernel.keys.maxkeys=20000 kernel.keys.maxbytes=2000000`,
      );
    }
    const s = await startBenchServer({
      env: {
        UMS_IDLE_WARM: "1h",
        UMS_IDLE_COLD: "1h",
        UMS_METRICS: "on",
        ...(SUBNET && { UMS_UNIT_SUBNET: SUBNET }),
      },
    });
    servers.push(s);
    execFileSync(UMS, ["org", "set-limits", "bench", "--running-limit", String(UNITS + 10)], {
      env: { ...process.env, UMS_DATA_DIR: s.dataDir },
    });
    // A boot that fails (a loaded host: the agent misses its deadline) is tried twice more, then
    // left out; booting stops at --boot-minutes, and the sampler is measured on what runs.
    let failed = 0;
    let firstFailure = "";
    const boot = async (i) => {
      const name = `u-${String(i).padStart(4, "0")}`;
      const c = await request(s.url, s.token, "POST", "/v1/units", { name });
      if (c.status !== 201) throw new Error(`create ${name}: ${c.status} ${c.body}`);
      for (let attempt = 0; attempt < 3; attempt++) {
        const r = await fetch(`${s.url}/v1/units/${name}/exec?cmd=true`, { method: "POST", headers: s.auth });
        const body = Buffer.from(await r.arrayBuffer());
        if (r.status === 200) return;
        firstFailure ||= `${name}: ${r.status} ${body.toString().slice(0, 300)}`;
      }
      failed++;
    };
    let next = 0;
    const t0 = performance.now();
    const bootDeadline = t0 + BOOT_MINUTES * 60_000;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < UNITS && performance.now() < bootDeadline) {
          const i = next++;
          await boot(i);
          if (i % 25 === 24) process.stderr.write(`${i + 1}/${UNITS} units booted\n`);
        }
      }),
    );
    process.stderr.write(
      `${next - failed} of ${UNITS} units booted in ${((performance.now() - t0) / 1000).toFixed(0)} s (${failed} failed)\n`,
    );
    if (firstFailure) rows.push(`- ${failed} of ${UNITS} boots failed, the first: ${firstFailure}`);
    const scrape = async () => {
      const t = (await request(s.url, s.token, "GET", "/metrics")).body.toString();
      const v = (name) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(t)?.[1] ?? Number.NaN);
      return { sampler: v("ums_usage_sampler_cpu_seconds_total"), units: v("ums_usage_sampler_units") };
    };
    await new Promise((r) => setTimeout(r, 12_000)); // one pass sees them all
    const a = await scrape();
    const p0 = cpuSeconds(s.pid);
    await new Promise((r) => setTimeout(r, SAMPLE_S * 1000));
    const b = await scrape();
    const whole = ((cpuSeconds(s.pid) - p0) / SAMPLE_S) * 100;
    const pct = ((b.sampler - a.sampler) / SAMPLE_S) * 100;
    rows.push(
      `- sampler CPU with ${b.units} running units over ${SAMPLE_S} s: ${pct.toFixed(3)} % of a core  [goal <= 2 %: ${pct <= 2 ? "PASS" : "MISS"}]` +
        `;  the whole server: ${whole.toFixed(2)} % of a core`,
    );
  }
}
