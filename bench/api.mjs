#!/usr/bin/env node
// Units API latency benchmark. Starts its own `ums serve` (fresh temp data dir, SQLite by default;
// PostgreSQL when UMS_BENCH_DATABASE_URL is set), drives it over keep-alive loopback HTTP and
// prints p50/p99 per operation next to a no-op baseline (GET /healthz) from the same server.
// It only reports: slow figures print MISS, never a failure. It exits non-zero only when
// something is broken (server does not start, unexpected status, list pages wrong).
//
//   npx tsc -b && node bench/api.mjs [--json] [--postgres]
//
// --postgres: PostgreSQL on a private cluster this run starts and removes (lib.mjs pgCluster).
// Env: UMS_BENCH_DATABASE_URL=postgres://... measure PostgreSQL (that server) instead of SQLite.
//      UMS_BENCH_TIMEOUT_S=1800  hard cap on the whole run.
//      UMS_BENCH_START_TIMEOUT_S=600  how long the server may take to answer GET /healthz.
//      UMS_BENCH_PG_ANALYZE=0  with PostgreSQL, skip ANALYZE after the fill (see README).
// Progress goes to stderr, results to stdout.
import { execFile, spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmdirSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { pgCluster } from "./lib.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const UMS = join(ROOT, "bin", "ums");
const JSON_OUT = process.argv.includes("--json");
// Loaded before a --postgres cluster is started: a server build that cannot load (a module missing)
// stops the run here, with nothing started yet to stop.
const testing = await import("@ums/server/testing");
// A private cluster for --postgres, stopped by cleanup().
const privatePg = process.argv.includes("--postgres") && !process.env.UMS_BENCH_DATABASE_URL ? pgCluster() : undefined;
const PG_URL = process.env.UMS_BENCH_DATABASE_URL || privatePg?.url || undefined;

const NOOP_WARMUP = 300;
const AUTH_WARMUP = 300;
const NOOP_N = 2000;
const CREATE_N = 1000;
const GET_N = 2000;
const TOTAL_UNITS = 10_000;
const LATE_CREATE_N = 200;
const FILL_CONCURRENCY = 8;
const REQUEST_TIMEOUT_MS = 30_000;
// Generous: a server with a unit runtime builds its base image in a fresh data dir before it listens.
const START_TIMEOUT_MS = Number(process.env.UMS_BENCH_START_TIMEOUT_S || 600) * 1000;
const STOP_TIMEOUT_MS = 10_000;
const RUN_TIMEOUT_MS = Number(process.env.UMS_BENCH_TIMEOUT_S || 1800) * 1000;
const GOAL_MS = 5;

// With PostgreSQL the database outlives the run, so each run gets its own organization and
// deletes its units at the end; SQLite gets a fresh data dir and the plain `bench` org.
const ORG = PG_URL ? `bench-${Date.now().toString(36)}` : "bench";
const unitName = (i) => `b-${String(i).padStart(5, "0")}`;

const dataDir = mkdtempSync(join(tmpdir(), "ums-bench-"));
const logPath = join(dataDir, "server.log");
const childEnv = { ...process.env };
delete childEnv.UMS_DATABASE_URL;
delete childEnv.UMS_LISTEN;
if (PG_URL) childEnv.UMS_DATABASE_URL = PG_URL;
// Units get their disks on the shared test pool and image (built once, cached in
// /var/tmp/ums-test-pool), in an address range of this run's own (`testing` is loaded above).
const subnet = await testing.lockSubnet();
Object.assign(childEnv, await testing.testServeEnv(subnet.n));

/** @type {import("node:child_process").ChildProcess | undefined} */
let server;
let serverExited;
let cleaning;

// ---------- process helpers ----------

function runCli(args) {
  return new Promise((resolve, reject) => {
    execFile(UMS, args, { env: childEnv, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ums ${args.join(" ")} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout.trim());
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = performance.now();
const progress = (msg) =>
  process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);

function serverLog() {
  try {
    return readFileSync(logPath, "utf8");
  } catch {
    return "";
  }
}

function healthy(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/healthz", agent: false, timeout: 1000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}

/** Spawns `ums serve` on a free loopback port; ready once GET /healthz answers 200. */
async function startServer() {
  for (let attempt = 1; ; attempt++) {
    const port = await testing.freePort();
    const logFd = openSync(logPath, "a");
    // `bin/ums` execs node, so the child's pid is the server's own pid. Logs go to a file, not a
    // pipe, so the benchmark never has to drain them and the server never blocks on them. The
    // server leads its own process group, so whatever it starts can be stopped with it.
    server = spawn(UMS, ["serve", "--data-dir", dataDir, "--listen", `127.0.0.1:${port}`], {
      env: childEnv,
      stdio: ["ignore", "ignore", logFd],
      detached: true,
    });
    closeSync(logFd);
    const child = server;
    child.on("error", (err) => process.stderr.write(`could not run ${UMS}: ${err.message}\n`));
    serverExited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
      if (await healthy(port)) return new URL(`http://127.0.0.1:${port}`);
      await sleep(50);
    }
    const exited = child.exitCode !== null || child.signalCode !== null;
    // Another process may have taken the port between the probe and the server's listen.
    if (exited && attempt < 3 && /EADDRINUSE/.test(serverLog())) continue;
    const why = exited
      ? `exited (${child.exitCode ?? child.signalCode})`
      : `not answering /healthz after ${START_TIMEOUT_MS} ms`;
    throw new Error(`server ${why}; log:\n${serverLog().split("\n").slice(-20).join("\n")}`);
  }
}

/** The dialect the server reports in its log, else the one the environment selects. */
function serverDialect() {
  for (const line of serverLog().split("\n")) {
    const m = /"dialect":"(\w+)"/.exec(line) ?? /database: (\w+)\)/.exec(line);
    if (m) return m[1];
  }
  return PG_URL ? "postgres" : "sqlite";
}

async function stopServer() {
  if (!server?.pid) return;
  const running = () => server.exitCode === null && server.signalCode === null;
  if (running()) {
    process.kill(server.pid, "SIGTERM");
    await Promise.race([serverExited, sleep(STOP_TIMEOUT_MS)]);
  }
  if (running()) {
    process.stderr.write(
      `server ${server.pid} ignored SIGTERM for ${STOP_TIMEOUT_MS} ms; killing it and its children\n`,
    );
    await killTree(server.pid);
    await serverExited;
  }
}

/** pid -> { ppid, start, zombie } from /proc (start time tells a reused pid apart). */
function procTable() {
  const table = new Map();
  let pids = [];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {}
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      table.set(Number(pid), { ppid: Number(f[1]), start: f[19], zombie: f[0] === "Z" });
    } catch {}
  }
  return table;
}

/**
 * SIGKILL `root` and every process descended from it, by pid. The tree is read before killing,
 * so children that a dying parent orphans are still known; some (mmdebstrap, for one) run in a
 * process group of their own, so killing the group would miss them.
 */
async function killTree(root) {
  const known = new Map();
  for (let round = 0; round < 10; round++) {
    const table = procTable();
    // Only a child of this process can be a root: never anything else on the machine.
    if (round === 0 && table.get(root)?.ppid === process.pid) known.set(root, table.get(root).start);
    for (let grew = true; grew; ) {
      grew = false;
      for (const [pid, p] of table) {
        if (!known.has(pid) && known.has(p.ppid) && known.get(p.ppid) === table.get(p.ppid)?.start) {
          known.set(pid, p.start);
          grew = true;
        }
      }
    }
    let alive = 0;
    for (const [pid, start] of known) {
      const p = table.get(pid);
      if (p?.start !== start || p.zombie || pid <= 1 || pid === process.pid) continue;
      alive++;
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    if (alive === 0) return;
    await sleep(200);
  }
}

function run(cmd, args) {
  return new Promise((resolve) => execFile(cmd, args, { timeout: 30_000 }, (err) => resolve(!err)));
}

/**
 * Mounts and loop devices the server left below the temp dir (a server with a unit runtime keeps
 * its storage pool there): unmount them, deepest first, and detach their loop devices, so the
 * temp dir can be removed. Nothing outside the temp dir is touched.
 */
async function releaseMounts() {
  const below = (p) => p === dataDir || p.startsWith(`${dataDir}/`);
  const unescapeMount = (p) => p.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(Number.parseInt(o, 8)));
  let mounts = [];
  try {
    mounts = readFileSync("/proc/mounts", "utf8")
      .split("\n")
      .map((l) => unescapeMount(l.split(" ")[1] ?? ""))
      .filter(below)
      .sort((a, b) => b.length - a.length);
  } catch {}
  for (const m of mounts) {
    if (!(await run("umount", [m]))) await run("umount", ["--lazy", m]);
  }
  let loops = [];
  try {
    loops = readdirSync("/sys/block").filter((d) => d.startsWith("loop"));
  } catch {}
  for (const loop of loops) {
    let backing = "";
    try {
      backing = readFileSync(`/sys/block/${loop}/loop/backing_file`, "utf8").trim();
    } catch {
      continue;
    }
    if (below(backing)) await run("losetup", ["-d", `/dev/${loop}`]);
  }
  if (mounts.length > 0) process.stderr.write(`released ${mounts.length} mount(s) the server left in ${dataDir}\n`);
}

/**
 * A server with a unit runtime names its host resources after `<dataDir>/runtime-id` and keeps
 * them when it stops (units outlive the server): its nftables table `ums_<rid>` and cgroups
 * `ums-<rid>`. This data dir is about to go, so they go too.
 */
async function releaseRuntime() {
  let rid = "";
  try {
    rid = readFileSync(join(dataDir, "runtime-id"), "utf8").trim();
  } catch {
    return;
  }
  if (!/^[0-9a-f]{4}$/.test(rid)) return;
  await run("nft", ["delete", "table", "inet", `ums_${rid}`]);
  const root = "/sys/fs/cgroup";
  let controllers = [];
  try {
    controllers = readdirSync(root);
  } catch {}
  for (const dir of [join(root, `ums-${rid}`), ...controllers.map((c) => join(root, c, `ums-${rid}`))]) {
    try {
      rmdirSync(dir);
    } catch {}
  }
}

function cleanup() {
  cleaning ??= (async () => {
    try {
      await stopServer();
    } finally {
      await testing.cleanupStoppedServer(dataDir, PG_URL).catch((err) => process.stderr.write(`cleanup: ${err}\n`));
      await subnet.unlock();
      await releaseRuntime();
      await releaseMounts();
      try {
        privatePg?.stop();
      } catch (err) {
        process.stderr.write(`cleanup: stopping the PostgreSQL cluster: ${err instanceof Error ? err.message : err}\n`);
      }
      try {
        rmSync(dataDir, { recursive: true, force: true });
      } catch (err) {
        process.stderr.write(`could not remove ${dataDir}: ${err instanceof Error ? err.message : err}\n`);
        process.exitCode = 1;
      }
    }
  })();
  return cleaning;
}

function rssOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
    return { rssMiB: kb("VmRSS") / 1024, peakMiB: kb("VmHWM") / 1024 };
  } catch {
    return { rssMiB: Number.NaN, peakMiB: Number.NaN };
  }
}

// ---------- HTTP client: node:http, keep-alive, no per-request allocation beyond the request ----------

function makeClient(base, token, maxSockets) {
  const agent = new http.Agent({ keepAlive: true, maxSockets, noDelay: true });
  const host = base.hostname;
  const port = Number(base.port);
  const authHeaders = { authorization: `Bearer ${token}` };
  const jsonHeaders = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  /** Resolves when the whole response body has arrived; `ms` covers request start to last byte. */
  function send(method, path, body, auth = true) {
    return new Promise((resolve, reject) => {
      const t0 = performance.now();
      const req = http.request(
        {
          host,
          port,
          method,
          path,
          agent,
          headers: body === undefined ? (auth ? authHeaders : undefined) : jsonHeaders,
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve({ status: res.statusCode, text, ms: performance.now() - t0 }));
          res.on("error", reject);
        },
      );
      req.setTimeout(REQUEST_TIMEOUT_MS, () =>
        req.destroy(new Error(`${method} ${path}: no answer in ${REQUEST_TIMEOUT_MS} ms`)),
      );
      req.on("error", reject);
      req.end(body);
    });
  }
  return { send, close: () => agent.destroy() };
}

function expect(res, status, what) {
  if (res.status !== status) {
    throw new Error(`${what}: HTTP ${res.status}, expected ${status}: ${res.text.slice(0, 300)}`);
  }
  return res;
}

// ---------- statistics ----------

function stats(samples) {
  const s = Float64Array.from(samples).sort();
  const at = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
  return { count: s.length, p50: at(0.5), p99: at(0.99), max: s[s.length - 1] };
}

// ---------- phases ----------

async function bench() {
  progress(`starting ums serve (data dir ${dataDir})`);
  const base = await startServer();
  progress(`server ${server.pid} up at ${base.origin}`);
  const pid = server.pid;
  const token = await runCli(["token", "create", "--org", ORG, "--data-dir", dataDir]);
  await runCli(["org", "set-limits", ORG, "--max-units", "20000", "--data-dir", dataDir]);
  const dialect = serverDialect();

  const client = makeClient(base, token, 1);
  const errors = [];
  const notes = [];
  const results = {};
  try {
    // Baseline: the cheapest route of the same server, same client, same connection.
    for (let i = 0; i < NOOP_WARMUP; i++)
      expect(await client.send("GET", "/healthz", undefined, false), 200, "healthz");
    const noop = [];
    for (let i = 0; i < NOOP_N; i++)
      noop.push(expect(await client.send("GET", "/healthz", undefined, false), 200, "healthz").ms);
    results.noop = stats(noop);

    // Warm the authenticated path (auth + routing + store reads) without creating anything.
    for (let i = 0; i < AUTH_WARMUP; i++) {
      expect(await client.send("GET", `/v1/units/${unitName(i + 1)}`), 404, "warm-up get");
      expect(await client.send("GET", "/v1/units?max_results=1"), 200, "warm-up list");
    }

    progress(`noop done; ${CREATE_N} creates, then ${GET_N} gets`);
    // Create: sequential, each request timed.
    const create = [];
    for (let i = 1; i <= CREATE_N; i++) {
      const body = JSON.stringify({ name: unitName(i) });
      create.push(expect(await client.send("POST", "/v1/units", body), 201, `create ${unitName(i)}`).ms);
    }
    results.create = stats(create);

    // Get: random existing units.
    const get = [];
    for (let i = 0; i < GET_N; i++) {
      const name = unitName(1 + Math.floor(Math.random() * CREATE_N));
      get.push(expect(await client.send("GET", `/v1/units/${name}`), 200, `get ${name}`).ms);
    }
    results.get = stats(get);

    progress(`filling the org to ${TOTAL_UNITS} units (concurrency ${FILL_CONCURRENCY})`);
    // Fill to TOTAL_UNITS, concurrently, untimed.
    const fillStart = performance.now();
    const filler = makeClient(base, token, FILL_CONCURRENCY);
    try {
      let next = CREATE_N + 1;
      const worker = async () => {
        while (next <= TOTAL_UNITS) {
          const name = unitName(next++);
          expect(await filler.send("POST", "/v1/units", JSON.stringify({ name })), 201, `create ${name}`);
        }
      };
      await Promise.all(Array.from({ length: FILL_CONCURRENCY }, worker));
    } finally {
      filler.close();
    }
    results.fill = { count: TOTAL_UNITS - CREATE_N, seconds: (performance.now() - fillStart) / 1000 };
    if (PG_URL) notes.push(await analyzeUnits());

    progress("listing");
    // List all units page by page; every unit must appear exactly once.
    for (const pageSize of [50, 500]) {
      const times = [];
      const seen = new Set();
      let dupes = 0;
      let cursor = "";
      for (let guard = 0; guard < TOTAL_UNITS + 10; guard++) {
        const q = `/v1/units?max_results=${pageSize}${cursor ? `&continuation_token=${encodeURIComponent(cursor)}` : ""}`;
        const res = expect(await client.send("GET", q), 200, `list page ${times.length + 1}`);
        times.push(res.ms);
        const page = JSON.parse(res.text);
        for (const u of page.sprites) {
          if (seen.has(u.name)) dupes++;
          seen.add(u.name);
        }
        if (!page.has_more) break;
        if (!page.next_continuation_token) {
          errors.push(`list ${pageSize}: has_more without next_continuation_token`);
          break;
        }
        cursor = page.next_continuation_token;
      }
      let missing = 0;
      for (let i = 1; i <= TOTAL_UNITS; i++) if (!seen.has(unitName(i))) missing++;
      const expectedPages = Math.ceil(TOTAL_UNITS / pageSize);
      if (seen.size !== TOTAL_UNITS || dupes || missing || times.length !== expectedPages) {
        errors.push(
          `list ${pageSize}: ${seen.size} distinct units (want ${TOTAL_UNITS}), ${dupes} duplicates, ${missing} missing, ${times.length} pages (want ${expectedPages})`,
        );
      }
      results[`list${pageSize}`] = stats(times);
    }

    // Create again with the org at 10,000 units: shows whether create slows as an org grows.
    const late = [];
    for (let i = TOTAL_UNITS + 1; i <= TOTAL_UNITS + LATE_CREATE_N; i++) {
      const body = JSON.stringify({ name: unitName(i) });
      late.push(expect(await client.send("POST", "/v1/units", body), 201, `create ${unitName(i)}`).ms);
    }
    results.create10k = stats(late);
    return { dialect, org: ORG, results, mem: rssOf(pid), errors, notes };
  } finally {
    client.close();
    // PostgreSQL outlives the run: delete this run's units, also after an error (not after
    // Ctrl-C, which should stop at once). The org and its token stay; they are tiny.
    if (PG_URL && !interrupted) await deleteUnits(base, token);
  }
}

/**
 * A table PostgreSQL has never analyzed looks empty to the planner, which then sorts every unit
 * after the cursor instead of walking the (org_id, name) index: a page of 50 costs ~10 ms instead
 * of ~0.1 ms until autovacuum analyzes it (about a minute later). Measure the steady state by
 * running ANALYZE through psql when it is installed; UMS_BENCH_PG_ANALYZE=0 measures cold statistics.
 */
async function analyzeUnits() {
  if (process.env.UMS_BENCH_PG_ANALYZE === "0")
    return "postgres: ANALYZE skipped (UMS_BENCH_PG_ANALYZE=0); list plans use whatever statistics exist";
  return new Promise((resolve) => {
    execFile("psql", [PG_URL, "-qXc", "ANALYZE units"], { timeout: 60_000 }, (err, _out, stderr) =>
      resolve(
        err
          ? `postgres: could not run ANALYZE units via psql (${(stderr || err.message).trim()}); list figures may reflect stale statistics`
          : "postgres: ran ANALYZE units via psql after the fill (steady-state plans)",
      ),
    );
  });
}

async function deleteUnits(base, token) {
  const deleter = makeClient(base, token, FILL_CONCURRENCY);
  try {
    let next = 1;
    const worker = async () => {
      while (next <= TOTAL_UNITS + LATE_CREATE_N) {
        const name = unitName(next++);
        const r = await deleter.send("DELETE", `/v1/units/${name}`);
        if (r.status !== 204 && r.status !== 404) throw new Error(`delete ${name}: HTTP ${r.status}`);
      }
    };
    await Promise.all(Array.from({ length: FILL_CONCURRENCY }, worker));
  } catch (err) {
    process.stderr.write(`could not delete the units of org '${ORG}': ${err instanceof Error ? err.message : err}\n`);
  } finally {
    deleter.close();
  }
}

// ---------- report ----------

function report({ dialect, results, mem, errors, notes }) {
  const noop = results.noop;
  const rows = [
    ["noop (GET /healthz)", noop],
    ["create", results.create],
    ["get", results.get],
    ["list-page (50 of 10,000)", results.list50],
    ["list-page (500 of 10,000)", results.list500],
    ["create (org at 10,000+)", results.create10k],
  ];
  const f3 = (x) => x.toFixed(3);
  const ratio = (x, b) => `${(x / b).toFixed(1)}x`;
  const table = [["operation", "count", "p50 ms", "p99 ms", "p50/noop", "p99/noop"]];
  for (const [label, s] of rows)
    table.push([label, String(s.count), f3(s.p50), f3(s.p99), ratio(s.p50, noop.p50), ratio(s.p99, noop.p99)]);
  const widths = table[0].map((_, c) => Math.max(...table.map((r) => r[c].length)));
  const lines = table.map((r) =>
    r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join("  "),
  );
  lines.splice(1, 0, widths.map((w) => "-".repeat(w)).join("  "));
  const goal = (label, s) => `${label} p50 <= ${GOAL_MS} ms: ${s.p50 <= GOAL_MS ? "PASS" : "MISS"} (${f3(s.p50)} ms)`;
  const out = [
    `ums units API benchmark — dialect: ${dialect}, node ${process.version}, ${noop.count} noop / ${results.create.count} create / ${results.get.count} get`,
    ...lines,
    `fill: ${results.fill.count} more creates at concurrency ${FILL_CONCURRENCY} in ${results.fill.seconds.toFixed(1)} s (${(results.fill.count / results.fill.seconds).toFixed(0)}/s, untimed per request)`,
    goal("create", results.create),
    goal("list page (50 of 10,000)", results.list50),
    `server RSS at end: ${mem.rssMiB.toFixed(1)} MiB (peak ${mem.peakMiB.toFixed(1)} MiB), dialect: ${dialect}`,
    ...notes,
    ...errors.map((e) => `ERROR: ${e}`),
  ];
  process.stdout.write(`${out.join("\n")}\n`);
  if (JSON_OUT) {
    const round = (s) => Object.fromEntries(Object.entries(s).map(([k, v]) => [k, Math.round(v * 1000) / 1000]));
    const json = {
      dialect,
      node: process.version,
      results: Object.fromEntries(Object.entries(results).map(([k, v]) => [k, round(v)])),
      goals: {
        create_p50_le_5ms: results.create.p50 <= GOAL_MS,
        list50_p50_le_5ms: results.list50.p50 <= GOAL_MS,
      },
      server_rss_mib: Math.round(mem.rssMiB * 10) / 10,
      server_peak_rss_mib: Math.round(mem.peakMiB * 10) / 10,
      notes,
      errors,
    };
    process.stdout.write(`${JSON.stringify(json)}\n`);
  }
}

// ---------- main ----------

let interrupted = false;
// A kill (SIGTERM: `kill`, `pkill`, a CI's time limit) cleans up as Ctrl-C does: without it the
// server, a --postgres cluster and every unit's disk on the shared test pool stayed behind.
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.once(sig, () => {
    interrupted = true;
    process.stderr.write(`\n${sig}: stopping the server and removing the temp dir\n`);
    cleanup().finally(() => process.exit(130));
  });
}
const watchdog = setTimeout(() => {
  interrupted = true;
  process.stderr.write(`benchmark exceeded ${RUN_TIMEOUT_MS / 1000} s; giving up\n`);
  cleanup().finally(() => process.exit(1));
}, RUN_TIMEOUT_MS);
watchdog.unref();

try {
  const outcome = await bench();
  report(outcome);
  if (outcome.errors.length > 0) process.exitCode = 1;
} catch (err) {
  // After Ctrl-C or the time cap the server goes away under the request in flight; that is no error to report.
  if (!interrupted) process.stderr.write(`benchmark error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await cleanup();
}
