#!/usr/bin/env node
// Issue #15 part 3: how long a placement decision takes at 10,000 units on 100 registered nodes
// (simulated rows: no host runs them), on SQLite and on PostgreSQL.
//
//   npx tsc -b && node bench/placement.mjs [--nodes 100] [--units 10000] [--decisions 2000]
//
// A decision is what a create does before it writes its unit: read every node with its unit
// counts (all, and the organization's) from the database, then filter, score and draw
// (node/placement/placement.ts). Baseline, same run, same database: reading one node's row by
// its id (one indexed round trip). Also shown: the pure function alone on rows already in memory.
// PostgreSQL: UMS_BENCH_DATABASE_URL, else a private cluster this script starts and removes
// (scripts/lib/pg-cluster.sh; fsync off, as in the tests); set UMS_BENCH_PG=0 to skip it.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NodePlacement } from "../packages/server/dist/node/placement/node-placement.js";
import { place } from "../packages/server/dist/node/placement/placement.js";
import { DOWN_AFTER_MS } from "../packages/server/dist/node/registry/liveness.js";
import { seededRandom } from "../packages/server/dist/soak/rng.js";
import { openStore } from "../packages/server/dist/store/open.js";
import { arg, fmt, percentile, pgCluster } from "./lib.mjs";

const NODES = arg("nodes", 100);
const UNITS = arg("units", 10_000);
const DECISIONS = arg("decisions", 2000);
const ORGS = 10;
const GOAL_MS = 5;
const GiB = 1024 ** 3;
const log = (m) => process.stderr.write(`${m}\n`);

async function fill(store) {
  const rnd = seededRandom(42);
  const now = new Date().toISOString();
  const nodeIds = [];
  for (let i = 0; i < NODES; i++) {
    const id = `node-00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
    nodeIds.push(id);
    await store.nodes.register(
      {
        id,
        name: `n${String(i).padStart(3, "0")}`,
        address: `http://10.0.${Math.floor(i / 250)}.${i % 250}:7072`,
        capacity: { cpus: 16, memoryBytes: 64 * GiB, diskBytes: 1000 * GiB, unitSlots: 300 },
        free: { memoryBytes: Math.floor((8 + rnd() * 48) * GiB), diskBytes: Math.floor((100 + rnd() * 800) * GiB) },
        labels: { zone: ["a", "b", "c"][i % 3] },
        version: "bench",
        startedAt: now,
      },
      now,
    );
  }
  // A few cordoned and a few down, as a real fleet has.
  for (let i = 0; i < 5; i++) await store.nodes.setState(`n${String(i * 7).padStart(3, "0")}`, "cordoned");
  const stale = new Date(Date.now() - 10 * DOWN_AFTER_MS).toISOString();
  for (let i = 0; i < 5; i++)
    await store.nodes.heartbeat(nodeIds[i * 11 + 3], { memoryBytes: GiB, diskBytes: GiB }, stale);
  const orgs = [];
  for (let o = 0; o < ORGS; o++)
    orgs.push(await store.orgs.ensure(`org${o}`, { maxUnits: UNITS, runningLimit: 10, warmLimit: 20 }));
  const started = performance.now();
  const batch = [];
  for (let u = 0; u < UNITS; u++) {
    const org = orgs[u % ORGS];
    batch.push(
      store.units.create(
        {
          id: `unit-${String(u).padStart(8, "0")}`,
          orgId: org.id,
          name: `u${u}`,
          urlLabel: `u${u}-bench`,
          status: "cold",
          urlAuth: "unit",
          privateAccess: null,
          labels: [],
          version: null,
          environmentVersion: null,
          createdAt: now,
          nodeId: nodeIds[Math.floor(rnd() * NODES)],
        },
        UNITS,
      ),
    );
    if (batch.length === 16) await Promise.all(batch.splice(0));
    if (u % 2000 === 1999) log(`  ${u + 1} units (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  }
  await Promise.all(batch);
  return { orgs, nodeIds, at: Date.parse(now) };
}

async function timed(n, fn) {
  for (let i = 0; i < Math.min(100, n); i++) await fn(i); // warm-up
  const samples = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn(i);
    samples.push(performance.now() - t);
  }
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

async function measure(dialect, databaseUrl) {
  const dir = mkdtempSync(join(tmpdir(), "ums-bench-placement-"));
  const store = await openStore({ dataDir: dir, databaseUrl });
  try {
    log(`${dialect}: ${NODES} nodes, ${UNITS} units of ${ORGS} organizations`);
    const { orgs, nodeIds, at } = await fill(store);
    if (dialect === "postgres" && process.env.UMS_BENCH_PG_ANALYZE !== "0") {
      // What autovacuum does by itself a minute after a fill: statistics, and the visibility map
      // that lets the count read the (node_id, org_id) index alone.
      try {
        execFileSync("psql", [databaseUrl, "-qc", "VACUUM ANALYZE units"], { stdio: "ignore" });
      } catch {
        log("psql failed: measuring before VACUUM ANALYZE");
      }
    }
    // The clock stands at the heartbeats' time: simulated rows age no more while they are measured.
    const placement = new NodePlacement(
      store,
      () => true,
      () => at,
    );
    const base = await timed(DECISIONS, (i) => store.nodes.get(nodeIds[i % NODES]));
    const decide = await timed(DECISIONS, (i) => placement.choose(orgs[i % ORGS]));
    const rows = (await store.nodes.usage(orgs[0].id)).map((u) => ({ ...u, reachable: true }));
    const pure = await timed(DECISIONS, () => place(rows, { now: at, downAfterMs: DOWN_AFTER_MS }));
    return { dialect, base, decide, pure };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = [];
results.push(await measure("sqlite", undefined));
if (process.env.UMS_BENCH_PG !== "0") {
  let cluster;
  let url = process.env.UMS_BENCH_DATABASE_URL;
  if (!url) {
    log("starting a private PostgreSQL cluster");
    cluster = pgCluster();
    url = cluster.url;
  }
  try {
    results.push(await measure("postgres", url));
  } finally {
    cluster?.stop();
  }
}

console.log(`placement decision, ${NODES} nodes, ${UNITS} units, ${DECISIONS} decisions each`);
console.log(["dialect", "what", "p50", "p99", "p50 / baseline"].join("\t"));
for (const r of results) {
  for (const [what, m] of [
    ["baseline: one node row by id", r.base],
    ["decision (read + place)", r.decide],
    ["place() alone, in memory", r.pure],
  ]) {
    console.log([r.dialect, what, fmt(m.p50), fmt(m.p99), `${(m.p50 / r.base.p50).toFixed(2)}x`].join("\t"));
  }
}
for (const r of results) {
  const ok = r.decide.p50 <= GOAL_MS;
  console.log(`goal (${r.dialect}): decision p50 <= ${GOAL_MS} ms: ${fmt(r.decide.p50)} ${ok ? "MET" : "MISS"}`);
}
