#!/usr/bin/env node
// Units move (issue #15): a cold unit with 1 GiB of files moved to another node, until its first
// exec answers. Goal: at most 5 s on loopback.
//
//   npx tsc -b && npm run build:agent && node bench/move.mjs [--mib 1024] [--runs 3] [--json]
//
// A deployment of real `ums serve` processes on one PostgreSQL database: one `--role api` and two
// `--role node` (n1, n2), each node with a data dir, a unit subnet, an endpoint and a btrfs pool of
// its own (a loop file with the test image copied in, testing/own-pool.ts: like two hosts, the
// nodes share no disk: a move sends the unit's files from one node's pool to the other's), and one
// object store for both (s3rver in a child process on 127.0.0.1). One unit is created through the API process,
// writes `--mib` MiB (half random, half zeros) and goes cold by itself (the nodes' idle timers are
// 1 s). Then, `--runs` times, moving it back and forth:
//
//   - the move: `POST /v1/units/{name}/move {"node": OTHER}` until its `complete` line, then the
//     first exec `true` (which boots the unit on its new node) until its answer: the figure;
//   - the baseline: once the unit is cold again, the same unit's cold boot + first exec `true` on
//     the node it is on, without a move (also measured once before the first move).
//
// Progress goes to stderr, results to stdout; slow figures print MISS; it exits non-zero only when
// something is broken. Everything it starts is removed at the end, on error, on Ctrl-C or SIGTERM
// and at the time cap (UMS_BENCH_TIMEOUT_S, default 1800): the unit (through the API), the servers
// (by PID), what the nodes leave on the host, their pools, data dirs, subnets, the database, the
// PostgreSQL cluster, the store and its files.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  benchPostgres,
  cleanupOnSignalsAndTimeCap,
  freePort,
  parseBenchFlags,
  percentile,
  query,
  serveGroup,
  stopProcess,
  tail,
} from "./lib.mjs";

const USAGE = `usage: node bench/move.mjs [options]

  --mib N     the unit's files, MiB (default 1024: half random, half zeros)
  --runs N    timed moves, back and forth between the two nodes (default 3)
  --json      also print one JSON object with all figures (last line of stdout)
  --help      this text

env: UMS_BENCH_DATABASE_URL (a PostgreSQL server to make the run's database on; default a private
cluster), UMS_BENCH_TIMEOUT_S (default 1800) caps the whole run.`;

const flags = parseBenchFlags(USAGE, ["mib", "runs"]);
const MIB = flags.mib ?? 1024;
const RUNS = flags.runs ?? 3;
const GOAL_MS = 5000;
const UNIT = "move-bench";
const ORG = "bench";
const BUCKET = "bench";
// Each node's pool: the test image, the unit's files and what a move receives (zeros compress).
const POOL_BYTES = Math.max(4096, 2 * MIB + 2048) * 1024 * 1024;

const log = (m) => process.stderr.write(`${m}\n`);
const secs = (x) => (Number.isFinite(x) ? `${(x / 1000).toFixed(2)} s` : "n/a");
const dist = (p) => new URL(`../packages/server/dist/${p}`, import.meta.url).href;
const sleep = (t) => new Promise((r) => setTimeout(r, t));

// ---------- what the run holds, and its cleanup ----------

let serves; // the `ums serve` processes (bench/lib.mjs serveGroup)
/** The nodes' own pools (openOwnPool), closed after the nodes stopped. */
const pools = [];
let postgres; // the PostgreSQL server, the database and the private cluster (bench/lib.mjs benchPostgres)
let tmp; // logs and the store's files
let s3; // the s3rver child process

let cleaning;
function cleanup() {
  cleaning ??= (async () => {
    // The unit through the API first (its container, network and disk go with it), then the
    // processes (API before the nodes), then what stopped nodes leave on the host, their subnets
    // and data dirs, then the pools, the store, the database and the cluster.
    await serves?.stopServes({ units: [UNIT] });
    for (const p of pools) await p.close().catch((e) => log(`cleanup: closing a pool: ${e.message}`));
    await stopProcess(s3);
    await postgres?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  })();
  return cleaning;
}
cleanupOnSignalsAndTimeCap(cleanup);

// ---------- starting the store and the servers ----------

/** s3rver in a child process on 127.0.0.1 (not in this one, whose CPU it would share). */
async function startStore(dir) {
  const code = `
    import S3rver from "s3rver";
    const s = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory: process.argv[1],
      configureBuckets: [{ name: ${JSON.stringify(BUCKET)}, configs: [] }] });
    const a = await s.run();
    process.stdout.write(a.port + "\\n");
    process.on("SIGTERM", () => s.close(() => process.exit(0)));`;
  s3 = spawn(process.execPath, ["--input-type=module", "-e", code, dir], {
    cwd: new URL("../packages/server/", import.meta.url).pathname,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise((resolve, reject) => {
    let out = "";
    s3.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(Number(out.trim()));
    });
    s3.on("exit", (c) => reject(new Error(`s3rver exited (${c}) before it listened`)));
  });
  return `s3://${BUCKET}/?endpoint=http://127.0.0.1:${port}&path_style=true`;
}

/**
 * A btrfs pool of the node's own (a loop file) with the test image and its manifest: `ums serve`
 * finds the image there as built (UMS_POOL_DIR, UMS_IMAGE_VARIANT=test) and builds nothing.
 */
async function ownPool() {
  const { openOwnPool } = await import(dist("testing/own-pool.js"));
  const { testImage } = await import(dist("runtime/image/test-image.js"));
  const p = await openOwnPool(POOL_BYTES);
  pools.push(p);
  const shared = await testImage();
  copyFileSync(`${shared.path}.json`, `${p.pool.imagePath}.json`);
  return p.pool.path;
}

// ---------- requests ----------

let api;
let execHttp;

/** An exec through the API process; throws unless it answers 200 and exit code 0. */
async function exec(cmd) {
  const r = await execHttp(api.url, api.token, UNIT, cmd);
  if (r.status !== 200 || r.exitCode !== 0) {
    throw new Error(
      `exec ${cmd.join(" ").slice(0, 80)} answered ${r.status}, exit ${r.exitCode}: ${r.body.toString().slice(0, 400)}`,
    );
  }
  return r;
}

async function unitStatus() {
  const r = await fetch(`${api.url}/v1/units/${UNIT}`, { headers: { authorization: `Bearer ${api.token}` } });
  if (r.status !== 200) throw new Error(`GET /v1/units/${UNIT} answered ${r.status}: ${await r.text()}`);
  return (await r.json()).status;
}

/** Waits (untimed) until the unit is cold: its node's idle timers stop it about 2 s after its last request. */
async function untilCold() {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const status = await unitStatus();
    if (status === "cold") return;
    if (Date.now() > deadline) throw new Error(`the unit is still ${status} after 60 s`);
    await sleep(200);
  }
}

async function nodeOfUnit(databaseUrl) {
  const rows = await query(
    databaseUrl,
    "select n.name from units u join nodes n on n.id = u.node_id where u.name = $1 and u.status <> 'deleted'",
    [UNIT],
  );
  return rows[0]?.name;
}

/**
 * The move's steps (server/src/node/move.ts), each ending at the progress line that the next one
 * starts with: stop (from the request: the plan, the stop of a running unit), checkpoint (its files
 * saved, until the target asks the old node for them), transfer (the old node's `btrfs send`
 * straight into the target's `btrfs receive`: whole the first time, then only what changed since
 * the snapshot the target kept when the unit left it), new disk (the target makes it the unit's
 * files), then the record and the old node's disk, until the `complete` line.
 */
const STEP_ENDS = [
  /is stopped; saving its files/,
  /receiving checkpoint .* from its node/,
  /received checkpoint .* in \d+ ms/,
  /has its files on this node/,
];
const STEP_NAMES = ["stop", "checkpoint", "transfer", "new disk", "record+old disk"];

/**
 * POST move until its `complete` line. Returns the time (ms) and the progress lines with their
 * arrival times; throws on an `error` line or another answer.
 */
async function move(node) {
  const t0 = performance.now();
  const r = await fetch(`${api.url}/v1/units/${UNIT}/move`, {
    method: "POST",
    headers: { authorization: `Bearer ${api.token}`, "content-type": "application/json" },
    body: JSON.stringify({ node }),
    signal: AbortSignal.timeout(600_000),
  });
  if (r.status !== 200) throw new Error(`move to ${node} answered ${r.status}: ${await r.text()}`);
  const lines = [];
  let buf = "";
  let done;
  const decoder = new TextDecoder();
  for await (const chunk of r.body) {
    const now = performance.now() - t0;
    buf += decoder.decode(chunk, { stream: true });
    let nl = buf.indexOf("\n");
    while (nl >= 0) {
      const text = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      nl = buf.indexOf("\n");
      if (!text) continue;
      const line = JSON.parse(text);
      lines.push({ at: now, ...line });
      if (line.type === "error") throw new Error(`move to ${node}: ${text}`);
      if (line.type === "complete") done ??= now;
    }
  }
  const complete = lines.find((l) => l.type === "complete");
  if (!complete || complete.data !== `unit ${UNIT} moved to node ${node}`) {
    throw new Error(`move to ${node}: no complete line naming it: ${JSON.stringify(lines).slice(0, 600)}`);
  }
  const marks = [0, ...STEP_ENDS.map((re) => lines.find((l) => re.test(l.data ?? ""))?.at), done];
  const steps = {};
  for (let i = 0; i < STEP_NAMES.length; i++) {
    const a = marks[i];
    const b = marks[i + 1];
    steps[STEP_NAMES[i]] = a !== undefined && b !== undefined ? b - a : Number.NaN;
  }
  const whole = lines.some((l) => /from its node \(whole/.test(l.data ?? ""));
  return {
    ms: done,
    steps,
    whole,
    lines: lines.map((l) => `${secs(l.at)} ${l.type}: ${l.data ?? l.message ?? ""}`),
  };
}

async function timedExecTrue() {
  const t = performance.now();
  await exec(["true"]);
  return performance.now() - t;
}

// ---------- the run ----------

const results = { mib: MIB, runs: [], baseline_ms: [] };
let ok = true;
try {
  tmp = mkdtempSync(join(tmpdir(), "ums-bench-move-"));
  serves = serveGroup({ org: ORG, logDir: tmp, dataDirPrefix: "ums-bench-move-" });
  const { testImage } = await import(dist("runtime/image/test-image.js"));
  await testImage({ onProgress: (p) => log(`image: ${p.message}`) });
  ({ execHttp } = await import(dist("testing/exec-client.js")));
  postgres = benchPostgres();
  const db = await postgres.createDatabase("move");
  log("starting the object store (s3rver on 127.0.0.1)");
  const objectStore = await startStore(join(tmp, "s3"));
  const secret = randomBytes(32).toString("hex");
  for (const name of ["n1", "n2"]) {
    log(`${name}: a pool of its own (the test image copied in)`);
    const pool = await ownPool();
    log(`${name}: starting ums serve --role node`);
    await serves.startServe(name, "node", db, {
      UMS_POOL_DIR: pool,
      UMS_OBJECT_STORE: objectStore,
      AWS_ACCESS_KEY_ID: "S3RVER",
      AWS_SECRET_ACCESS_KEY: "S3RVER",
      UMS_NODE_SECRET: secret,
      UMS_NODE_LISTEN: `127.0.0.1:${await freePort()}`,
      UMS_NODE_NAME: name,
      // A unit left alone is paused after 1 s and stopped (cold) 1 s later.
      UMS_IDLE_WARM: "1s",
      UMS_IDLE_COLD: "1s",
    });
  }
  log("starting ums serve --role api");
  api = await serves.startServe("api", "api", db, { UMS_NODE_SECRET: secret });

  const created = await fetch(`${api.url}/v1/units`, {
    method: "POST",
    headers: { authorization: `Bearer ${api.token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: UNIT }),
  });
  if (created.status !== 201) throw new Error(`create answered ${created.status}: ${await created.text()}`);
  let at = await nodeOfUnit(db);
  const half = Math.floor(MIB / 2);
  log(`unit ${UNIT} on ${at}: writing ${half} MiB of random bytes and ${MIB - half} MiB of zeros`);
  const wrote = await exec([
    "sh",
    "-c",
    `head -c ${half}M /dev/urandom > /home/unit/f1 && head -c ${MIB - half}M /dev/zero > /home/unit/f2 && sync && sha256sum /home/unit/f1 /home/unit/f2`,
  ]);
  const sums = wrote.stdout.toString();
  await untilCold();
  let base = await timedExecTrue();
  results.baseline_ms.push(base);
  log(`baseline on ${at}: cold boot + first exec ${secs(base)}`);

  for (let i = 1; i <= RUNS; i++) {
    await untilCold();
    const to = at === "n1" ? "n2" : "n1";
    log(`run ${i}: moving the cold unit ${at} -> ${to}`);
    const m = await move(to);
    const first = await timedExecTrue();
    for (const l of m.lines) log(`  ${l}`);
    const now = await nodeOfUnit(db);
    if (now !== to) throw new Error(`after the move the unit's record names ${now}, not ${to}`);
    const row = {
      from: at,
      to,
      copy: m.whole ? "whole" : "changes",
      move_ms: m.ms,
      first_exec_ms: first,
      total_ms: m.ms + first,
      steps_ms: m.steps,
    };
    results.runs.push(row);
    log(`  move ${secs(m.ms)} + first exec ${secs(first)} = ${secs(row.total_ms)}`);
    at = to;
    // Its files came with it (untimed).
    const check = await exec(["sha256sum", "/home/unit/f1", "/home/unit/f2"]);
    if (check.stdout.toString() !== sums) throw new Error(`the unit's files differ after the move to ${to}`);
    await untilCold();
    base = await timedExecTrue();
    results.baseline_ms.push(base);
    log(`  baseline on ${to}: cold boot + first exec ${secs(base)}`);
  }
  const totals = results.runs.map((r) => r.total_ms);
  results.total_p50_ms = percentile(totals, 50);
  // The first move of a unit to a node copies it whole; a later one only what changed since the
  // snapshot that node kept when the unit left it.
  const whole = results.runs.filter((r) => r.copy === "whole").map((r) => r.total_ms);
  const changes = results.runs.filter((r) => r.copy === "changes").map((r) => r.total_ms);
  results.whole_p50_ms = whole.length ? percentile(whole, 50) : null;
  results.changes_p50_ms = changes.length ? percentile(changes, 50) : null;
  results.move_p50_ms = percentile(
    results.runs.map((r) => r.move_ms),
    50,
  );
  results.first_exec_p50_ms = percentile(
    results.runs.map((r) => r.first_exec_ms),
    50,
  );
  results.baseline_p50_ms = percentile(results.baseline_ms, 50);
  results.ratio_p50 = results.total_p50_ms / results.baseline_p50_ms;
  results.goal_ms = GOAL_MS;
  results.pass = results.total_p50_ms <= GOAL_MS;
} catch (err) {
  ok = false;
  log(`ERROR: ${err?.stack ?? err}`);
  for (const s of serves?.servers ?? []) if (s.log) log(`--- ${s.name} log (tail) ---\n${tail(s.log)}`);
} finally {
  await cleanup();
}

console.log(
  `\nums unit move, issue #15: a cold unit with ${MIB} MiB (half random, half zeros) moved to another node until its first exec answers`,
);
console.log("(one --role api, two --role node with pools of their own, s3rver on 127.0.0.1; same host)");
console.log(["run", "from->to", "copy", "move", "first exec", "total", ...STEP_NAMES].join("\t"));
for (const [i, r] of results.runs.entries()) {
  console.log(
    [
      i + 1,
      `${r.from}->${r.to}`,
      r.copy,
      secs(r.move_ms),
      secs(r.first_exec_ms),
      secs(r.total_ms),
      ...STEP_NAMES.map((n) => secs(r.steps_ms[n])),
    ].join("\t"),
  );
}
if (results.baseline_ms.length > 0) {
  console.log(
    `baseline (the same unit's cold boot + first exec on its own node, no move): ${results.baseline_ms.map(secs).join(", ")}`,
  );
}
if (results.runs.length > 0) {
  console.log(
    `p50: total ${secs(results.total_p50_ms)} (move ${secs(results.move_p50_ms)}, first exec ${secs(results.first_exec_p50_ms)}); baseline ${secs(results.baseline_p50_ms)}; ratio ${results.ratio_p50.toFixed(1)}x`,
  );
  console.log(`goal: total <= ${GOAL_MS / 1000} s: ${secs(results.total_p50_ms)} ${results.pass ? "PASS" : "MISS"}`);
  for (const [what, v] of [
    ["a first move (the unit copied whole)", results.whole_p50_ms],
    ["a later move (only what changed since the target's kept snapshot)", results.changes_p50_ms],
  ]) {
    if (v !== null) {
      console.log(
        `  ${what}: p50 ${secs(v)}, ${(v / results.baseline_p50_ms).toFixed(1)}x the baseline: ${v <= GOAL_MS ? "PASS" : "MISS"}`,
      );
    }
  }
}
console.log(`load: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
if (flags.json) console.log(JSON.stringify({ ok, ...results }));
process.exit(ok ? 0 : 1);
