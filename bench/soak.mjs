// Issue #20: the soak (and with --chaos, the chaos) run. A seeded random workload against a
// `ums serve` of its own; see bench/README.md. Prints the seed first, so any run can be replayed.
//   node bench/soak.mjs [--minutes 15] [--units 8] [--seed N] [--chaos] [--ops-per-second 4] [--json]
//                       [--kill-gap 20,50] [--verify-every 60]   (seconds; what the suite's runs use, to replay them)
//                       [--replica] [--idle-warm 15s] [--idle-cold 45s]
// With --replica (issue #15) the workload goes through an API process (`ums serve --role api`) to a
// node (`--role node`) on PostgreSQL (UMS_BENCH_DATABASE_URL's server, else a private cluster);
// with --chaos too, its kills of `ums serve` are of one of the two at a time.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { arg, benchPostgres, freePort, running, serveGroup, stopProcess, UMS } from "./lib.mjs";

const { runSoak, formatReport, SOAK_ORG } = await import("../packages/server/dist/soak/run.js");
const { stopChild } = await import("../packages/server/dist/testing/serve-process.js");
const { newSeed } = await import("../packages/server/dist/soak/rng.js");

const chaos = process.argv.includes("--chaos");
const replica = process.argv.includes("--replica");
const text = (name) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const seed = arg("seed", newSeed());
const minutes = arg("minutes", chaos ? 10 : 15);
const units = arg("units", 8);
const opsPerSecond = arg("ops-per-second", 4);
const verifyEvery = arg("verify-every", 60);
const gapAt = process.argv.indexOf("--kill-gap");
const killGap = gapAt > 0 ? process.argv[gapAt + 1]?.split(",").map(Number) : [20, 50];
if (killGap?.length !== 2 || !killGap.every((n) => n > 0))
  throw new Error("--kill-gap is LO,HI in seconds, e.g. 20,50");
process.stderr.write(`${chaos ? "chaos" : "soak"}: seed ${seed}\n`);

// Ctrl-C ends the workload early; the end phase (delete everything, leak check, cleanup) still runs.
const stop = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"])
  process.on(sig, () => {
    if (stop.signal.aborted) process.exit(130);
    process.stderr.write(`${sig}: ending the run (again to quit at once, leaving units behind)\n`);
    stop.abort();
  });

const report = await runSoak({
  seed,
  minutes,
  units,
  chaos,
  opsPerSecond,
  verifyEvery,
  killGap,
  idleWarm: text("idle-warm"),
  idleCold: text("idle-cold"),
  ...(replica && { target: replicaTarget }),
  signal: stop.signal,
  log: (l) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${l}\n`),
});
console.log(formatReport(report));
if (process.argv.includes("--json"))
  console.log(
    JSON.stringify(report, (_k, v) => (v instanceof Map ? Object.fromEntries(v) : Number.isNaN(v) ? null : v)),
  );
// Benchmarks only report; a run that found violations says so and exits 1 (something is broken).
process.exit(report.violations.length ? 1 : 0);

/**
 * The soak's target for --replica: a node and an API process in front of it on a database of their
 * own, each with a data dir and port of its own (bench/lib.mjs serveGroup), the run's `env` (idle
 * times, no uplinks, no egress ranges) given to both. The chaos kills one of them at a time and
 * starts it again on its data dir.
 */
async function replicaTarget(env) {
  const logDir = mkdtempSync(join(tmpdir(), "ums-soak-replica-"));
  const serves = serveGroup({ org: SOAK_ORG, logDir, dataDirPrefix: "ums-soak-" });
  const postgres = benchPostgres();
  const secret = randomBytes(32).toString("hex");
  let db;
  let node;
  let api;
  let limit;
  const processes = () => [node, api].filter(Boolean);
  return {
    label: "ums serve --role api + --role node",
    parts: ["api", "node"],
    base: () => api.url,
    token: () => api.token,
    unitDataDir: () => node.dataDir,
    runtimeId: () => node.runtimeId,
    async setRunningLimit(n) {
      limit = n; // set once the API process has made the organization (its token), before any unit
    },
    async start() {
      if (node && api) {
        // Again after a kill (the node first: the API's calls go to it), on the same data dirs.
        for (const s of [node, api]) if (!running(s.child)) await serves.restartServe(s);
        return;
      }
      db ??= await postgres.createDatabase("soak");
      node = await serves.startServe("node", "node", db, {
        ...env,
        UMS_NODE_SECRET: secret,
        UMS_NODE_LISTEN: `127.0.0.1:${await freePort()}`,
        UMS_NODE_NAME: "soak-node",
      });
      node.runtimeId = readFileSync(join(node.dataDir, "runtime-id"), "utf8").trim();
      api = await serves.startServe("api", "api", db, { ...env, UMS_NODE_SECRET: secret });
      // The organization's limits hold across nodes: they live in the shared database.
      if (limit !== undefined)
        execFileSync(UMS, ["org", "set-limits", SOAK_ORG, "--running-limit", `${limit}`, "--warm-limit", `${limit}`], {
          env: api.env,
        });
    },
    running: () => processes().length === 2 && processes().every((s) => running(s.child)),
    pids: () => processes().flatMap((s) => (running(s.child) ? [s.child.pid] : [])),
    async stop(signal, part) {
      // The API first: nothing calls a node that is gone.
      for (const s of [api, node]) {
        if (!s || !running(s.child) || (part && s.name !== part)) continue;
        // SIGTERM with a SIGKILL after 10 s; any other signal (the chaos's SIGKILL) as it is.
        await (signal === "SIGTERM" ? stopProcess(s.child) : stopChild(s.child, signal));
      }
    },
    async removeServerResources() {
      const hc = await import("../packages/server/dist/testing/host-cleanup.js");
      for (const s of processes()) await hc.removeServerHostResources(s.dataDir);
    },
    async close() {
      try {
        await serves.stopServes();
      } finally {
        await postgres.stop();
        rmSync(logDir, { recursive: true, force: true });
      }
    },
  };
}
