#!/usr/bin/env node
// API replica overhead (issue #15): what it costs to reach a unit through an `api` process that
// talks to the unit's node over the node endpoint (node/remote/), against the same request to a
// single-process server (`--role all`), both started in this run, on the same host and database
// server:
//
//   - exec `true`: POST /v1/units/{name}/exec?cmd=true, to the last byte of the answer;
//   - a 1 MiB fs read: GET /v1/units/{name}/fs/read of a file of 1 MiB, to the last byte.
//
// Goal: at most 1.5 ms more at p50 through the replica.
//
//   npx tsc -b && npm run build:agent && node bench/api-replica.mjs [--execs 500] [--reads 200] [--json]
//
// Three `ums serve` processes: the baseline (`--role all`), and a deployment of one `--role api`
// and one `--role node` sharing a database and a node secret. The databases are two of their own on
// UMS_BENCH_DATABASE_URL's server, else on a private PostgreSQL cluster this script starts. Units
// run on the shared test pool and image with uplinks and egress ranges `none`. Requests go one
// after another, alternating between the two setups (one keep-alive connection to each server), so
// both see the same host load. Progress goes to stderr, results to stdout; slow figures print MISS;
// it exits non-zero only when something is broken. Everything it starts is removed at the end, on
// error, on Ctrl-C or SIGTERM and at the time cap (UMS_BENCH_TIMEOUT_S, default 1800): the units
// (through the API), the servers (by PID), their host resources, data dirs, subnets and databases,
// and the PostgreSQL cluster.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  assertOwnPackages,
  benchPostgres,
  cleanupOnSignalsAndTimeCap,
  freePort,
  fmt as ms,
  parseBenchFlags,
  percentile,
  procCpuMs,
  serveGroup,
  tail,
} from "./lib.mjs";

const USAGE = `usage: node bench/api-replica.mjs [options]

  --execs N   timed exec \`true\` requests to each setup (default 500)
  --reads N   timed 1 MiB fs reads from each setup (default 200)
  --against DIR  also an API process and a node of another checkout (bench/against-tree.sh), a
              third setup interleaved with the two others, so that a change is compared in one run
  --json      also print one JSON object with all figures (last line of stdout)
  --help      this text

env: UMS_BENCH_DATABASE_URL (a PostgreSQL server to make the run's two databases on; default a
private cluster), UMS_BENCH_TIMEOUT_S (default 1800) caps the whole run.`;

const flags = parseBenchFlags(USAGE, ["execs", "reads"], process.argv.slice(2), ["against"]);
const AGAINST = flags.against ? resolve(flags.against) : undefined;
if (AGAINST) assertOwnPackages(AGAINST);
const EXECS = flags.execs ?? 500;
const READS = flags.reads ?? 200;
const GOAL_EXTRA_MS = 1.5;
const FILE_BYTES = 1 << 20;
const UNIT = "replica-bench";
const ORG = "bench";
// The units do not go idle during the run.
const NO_IDLE = { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" };

const log = (m) => process.stderr.write(`${m}\n`);
const signed = (x) => (Number.isFinite(x) && x >= 0 ? `+${ms(x)}` : ms(x));
const dist = (p) => new URL(`../packages/server/dist/${p}`, import.meta.url).href;

// ---------- what the run holds, and its cleanup ----------

let serves; // the `ums serve` processes (bench/lib.mjs serveGroup)
let postgres; // the PostgreSQL server, its databases and the private cluster (bench/lib.mjs benchPostgres)
let tmp; // logs
const agents = [];

let cleaning;
function cleanup() {
  cleaning ??= (async () => {
    for (const a of agents) a.destroy();
    // The unit through the API of each setup first, then the servers, what they leave on the host,
    // their subnets and data dirs; then the databases and the cluster.
    await serves?.stopServes({ units: [UNIT] });
    await postgres?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  })();
  return cleaning;
}
cleanupOnSignalsAndTimeCap(cleanup);

// ---------- requests ----------

/** One request over `agent`'s connection; resolves with the status and the whole body. */
function request(s, agent, method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${s.url}${path}`,
      {
        method,
        agent,
        headers: {
          authorization: `Bearer ${s.token}`,
          ...(body && { "content-type": "application/octet-stream", "content-length": body.length }),
        },
      },
      (res) => {
        const parts = [];
        res.on("data", (d) => parts.push(d));
        res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(parts) }));
        res.on("error", reject);
      },
    );
    req.setTimeout(60_000, () => req.destroy(new Error(`${method} ${path}: no answer in 60 s`)));
    req.on("error", reject);
    req.end(body);
  });
}

const ops = {
  async exec(s, agent) {
    const r = await request(s, agent, "POST", `/v1/units/${UNIT}/exec?cmd=true`);
    // The answer's last frame is [3, exit code] (docs/ARCHITECTURE.md section 10).
    if (r.status !== 200 || r.body.at(-2) !== 3 || r.body.at(-1) !== 0) {
      throw new Error(`${s.name}: exec true answered ${r.status}: ${r.body.toString().slice(0, 300)}`);
    }
  },
  async read(s, agent, expect) {
    const r = await request(s, agent, "GET", `/v1/units/${UNIT}/fs/read?path=/tmp/blob&workingDir=/`);
    if (r.status !== 200 || r.body.length !== FILE_BYTES) {
      throw new Error(`${s.name}: fs read answered ${r.status} with ${r.body.length} bytes`);
    }
    if (expect && !r.body.equals(expect)) throw new Error(`${s.name}: fs read answered other bytes than written`);
  },
};

/**
 * One JSON call to a node's endpoint (resourceLimits: no unit, no work), as an API process makes
 * its calls; `agent` false: on a new connection, as RemoteNode does.
 */
function nodeCall(node, agent) {
  return new Promise((resolve, reject) => {
    const body = '{"args":[]}';
    const req = http.request(
      `http://${node.env.UMS_NODE_LISTEN}/node/v1/call/resourceLimits`,
      {
        method: "POST",
        agent,
        headers: {
          authorization: `Bearer ${node.env.UMS_NODE_SECRET}`,
          "content-type": "application/json",
          "content-length": body.length,
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`node call: ${res.statusCode}`))));
      },
    );
    req.setTimeout(60_000, () => req.destroy(new Error("node call: no answer in 60 s")));
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * `n` timed requests of `op` to each setup, alternating which goes first, after `warm` untimed
 * ones of each. Returns the samples (ms) of each setup.
 */
async function measure(op, n, warm, setups) {
  for (let i = 0; i < warm; i++) for (const x of setups) await ops[op](x.server, x.agent, x.blob);
  const samples = setups.map(() => []);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < setups.length; k++) {
      const j = (k + i) % setups.length;
      const x = setups[j];
      const t = performance.now();
      await ops[op](x.server, x.agent);
      samples[j].push(performance.now() - t);
    }
    if ((i + 1) % 100 === 0) log(`  ${op}: ${i + 1}/${n}`);
  }
  // The content is checked once more, untimed.
  for (const x of setups) await ops[op](x.server, x.agent, x.blob);
  return samples;
}

// ---------- the run ----------

const results = {};
let ok = true;
try {
  tmp = mkdtempSync(join(tmpdir(), "ums-bench-replica-"));
  serves = serveGroup({ org: ORG, logDir: tmp, dataDirPrefix: "ums-bench-" });
  const { testImage } = await import(dist("runtime/image/test-image.js"));
  await testImage({ onProgress: (p) => log(`image: ${p.message}`) });
  postgres = benchPostgres();
  const secret = randomBytes(32).toString("hex");
  log("starting the single-process server (--role all)");
  const single = await serves.startServe("single", "all", await postgres.createDatabase("single"), NO_IDLE);
  // A node and an API process in front of it, on a database of their own: this tree's, and with
  // --against another tree's.
  const pair = async (tag, ums) => {
    const db = await postgres.createDatabase(`cluster${tag}`);
    const endpointPort = await freePort();
    const node = await serves.startServe(
      `node${tag}`,
      "node",
      db,
      {
        ...NO_IDLE,
        UMS_NODE_SECRET: secret,
        UMS_NODE_LISTEN: `127.0.0.1:${endpointPort}`,
        UMS_NODE_NAME: `bench-node${tag.replace("_", "-")}`,
      },
      ums,
    );
    const api = await serves.startServe(`api${tag}`, "api", db, { ...NO_IDLE, UMS_NODE_SECRET: secret }, ums);
    return { node, api };
  };
  log("starting a node (--role node) and an API process (--role api) on one database");
  const { node, api } = await pair("", undefined);
  let other;
  if (AGAINST) {
    log(`starting a node and an API process of ${AGAINST} on another database`);
    other = await pair("_against", join(AGAINST, "bin", "ums"));
  }

  const blob = randomBytes(FILE_BYTES);
  const setups = [];
  for (const server of [single, api, ...(other ? [other.api] : [])]) {
    const created = await fetch(`${server.url}/v1/units`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: UNIT }),
    });
    if (created.status !== 201)
      throw new Error(`${server.name}: create answered ${created.status}: ${await created.text()}`);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    const w = await request(server, agent, "PUT", `/v1/units/${UNIT}/fs/write?path=/tmp/blob&workingDir=/`, blob);
    if (w.status !== 200) throw new Error(`${server.name}: fs write answered ${w.status}: ${w.body}`);
    setups.push({ server, agent, blob });
  }
  // The servers' own CPU time over each phase, per request: the single process's, and the API
  // processes' and the nodes' (the units' agents are the same in every setup and left out).
  const cpu = async (run, n) => {
    const procs = { single, api, node, ...(other && { api_against: other.api, node_against: other.node }) };
    const before = Object.fromEntries(Object.entries(procs).map(([k, s]) => [k, procCpuMs(s.child.pid).own]));
    const samples = await run();
    const per = Object.entries(procs).map(([k, s]) => [`${k}_ms`, (procCpuMs(s.child.pid).own - before[k]) / (n + 1)]);
    return { samples, cpu: Object.fromEntries(per) };
  };
  log(`exec true: ${EXECS} per setup (50 untimed first)`);
  const exec = await cpu(() => measure("exec", EXECS, 50, setups), EXECS + 50);
  log(`fs read of 1 MiB: ${READS} per setup (20 untimed first)`);
  const read = await cpu(() => measure("read", READS, 20, setups), READS + 20);
  // What one hop to the node costs by itself: a JSON call on a new connection (as the API makes
  // them), and on a kept-alive one.
  log(`node endpoint: ${EXECS} JSON calls each on new and on kept-alive connections`);
  const keep = new http.Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(keep);
  const hops = [[], []];
  for (let i = 0; i < EXECS + 50; i++) {
    for (const [k, agent] of [false, keep].entries()) {
      const t = performance.now();
      await nodeCall(node, agent);
      if (i >= 50) hops[k].push(performance.now() - t);
    }
  }
  results.node_call = {
    n: EXECS,
    new_connection_p50_ms: percentile(hops[0], 50),
    new_connection_p90_ms: percentile(hops[0], 90),
    kept_alive_p50_ms: percentile(hops[1], 50),
    kept_alive_p90_ms: percentile(hops[1], 90),
  };
  for (const [what, s] of [
    ["exec", exec],
    ["read", read],
  ]) {
    const [base, replica, against] = s.samples.map((x) => ({ p50: percentile(x, 50), p90: percentile(x, 90) }));
    results[what] = {
      n: s.samples[0].length,
      cpu_per_request_ms: s.cpu,
      single_p50_ms: base.p50,
      single_p90_ms: base.p90,
      replica_p50_ms: replica.p50,
      replica_p90_ms: replica.p90,
      extra_p50_ms: replica.p50 - base.p50,
      extra_p90_ms: replica.p90 - base.p90,
      ratio_p50: replica.p50 / base.p50,
      goal_max_extra_p50_ms: GOAL_EXTRA_MS,
      pass: replica.p50 - base.p50 <= GOAL_EXTRA_MS,
      ...(against && {
        against: AGAINST,
        against_p50_ms: against.p50,
        against_p90_ms: against.p90,
        against_extra_p50_ms: against.p50 - base.p50,
        against_extra_p90_ms: against.p90 - base.p90,
      }),
    };
  }
} catch (err) {
  ok = false;
  log(`ERROR: ${err?.stack ?? err}`);
  for (const s of serves?.servers ?? []) if (s.log) log(`--- ${s.name} log (tail) ---\n${tail(s.log)}`);
} finally {
  await cleanup();
}

console.log("\nums API replica overhead, issue #15 (against a single-process server of the same run, same host)");
console.log(["request", "setup", "n", "p50", "p90", "extra p50", "extra p90", "p50 ratio"].join("\t"));
for (const [what, label] of [
  ["exec", "exec true"],
  ["read", "fs read 1 MiB"],
]) {
  const r = results[what];
  if (!r) continue;
  console.log(
    [label, "single process (--role all)", r.n, ms(r.single_p50_ms), ms(r.single_p90_ms), "", "", ""].join("\t"),
  );
  console.log(
    [
      label,
      "api replica -> node",
      r.n,
      ms(r.replica_p50_ms),
      ms(r.replica_p90_ms),
      signed(r.extra_p50_ms),
      signed(r.extra_p90_ms),
      `${r.ratio_p50.toFixed(2)}x`,
    ].join("\t"),
  );
  if (r.against) {
    console.log(
      [
        label,
        `api replica -> node of ${r.against}`,
        r.n,
        ms(r.against_p50_ms),
        ms(r.against_p90_ms),
        signed(r.against_extra_p50_ms),
        signed(r.against_extra_p90_ms),
        `${(r.against_p50_ms / r.single_p50_ms).toFixed(2)}x`,
      ].join("\t"),
    );
  }
}
if (results.node_call) {
  const h = results.node_call;
  console.log(
    [
      "node endpoint call",
      "new connection (as the API)",
      h.n,
      ms(h.new_connection_p50_ms),
      ms(h.new_connection_p90_ms),
    ].join("\t"),
  );
  console.log(
    ["node endpoint call", "kept-alive connection", h.n, ms(h.kept_alive_p50_ms), ms(h.kept_alive_p90_ms)].join("\t"),
  );
}
for (const [what, label] of [
  ["exec", "exec true"],
  ["read", "fs read 1 MiB"],
]) {
  const r = results[what];
  if (!r) continue;
  console.log(
    `goal (${label}): extra p50 <= ${GOAL_EXTRA_MS} ms: ${signed(r.extra_p50_ms)} ${r.pass ? "PASS" : "MISS"}`,
  );
}
for (const [what, label] of [
  ["exec", "exec true"],
  ["read", "fs read 1 MiB"],
]) {
  const c = results[what]?.cpu_per_request_ms;
  if (!c) continue;
  console.log(
    `server CPU per request (${label}): single process ${ms(c.single_ms)}; api ${ms(c.api_ms)} + node ${ms(c.node_ms)} = ${ms(c.api_ms + c.node_ms)}`,
  );
  if (c.api_against_ms !== undefined) {
    console.log(
      `server CPU per request (${label}), ${AGAINST}: api ${ms(c.api_against_ms)} + node ${ms(c.node_against_ms)} = ${ms(c.api_against_ms + c.node_against_ms)}`,
    );
  }
}
console.log(`load: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
if (flags.json) console.log(JSON.stringify({ ok, ...results }));
process.exit(ok ? 0 : 1);
