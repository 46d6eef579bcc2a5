// Issue #20: the soak (and with --chaos, the chaos) run. A seeded random workload against a
// `ums serve` of its own; see bench/README.md. Prints the seed first, so any run can be replayed.
//   node bench/soak.mjs [--minutes 15] [--units 8] [--seed N] [--chaos] [--ops-per-second 4] [--json]
//                       [--kill-gap 20,50] [--verify-every 60]   (seconds; what the suite's runs use, to replay them)
import { arg } from "./lib.mjs";

const { runSoak, formatReport } = await import("../packages/server/dist/soak/run.js");
const { newSeed } = await import("../packages/server/dist/soak/rng.js");

const chaos = process.argv.includes("--chaos");
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
