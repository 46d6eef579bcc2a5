#!/usr/bin/env node
// CLI start-up benchmark (issue 13): the wall time of `ums exec NAME -- true` (a new process each
// time, as a user runs it) against the same call through the SDK in one process (the baseline,
// measured in the same run on the same warm unit). The difference is what the CLI costs: node's
// start, loading the CLI and SDK, reading the config, one extra GET of the unit. Also printed:
// `node -e ''` alone (the floor no node CLI can go under). Goal: `ums exec` <= 150 ms.
//
//   npx tsc -b && npm run build:agent && node bench/cli.mjs [--runs 20]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UmsClient, Unit } from "../packages/sdk/dist/index.js";
import { arg, fmt, percentile, ROOT, startBenchServer, UMS } from "./lib.mjs";

const RUNS = arg("runs", 20);
const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const home = mkdtempSync(join(tmpdir(), "ums-bench-cli-"));
try {
  const client = new UmsClient({ baseUrl: bench.url, token: bench.token });
  const unit = await Unit.create("clibench", { client });
  // Wakes the unit: every timed call finds it running.
  await unit.commands.run(["true"]);

  const env = { PATH: process.env.PATH, HOME: home, UMS_URL: bench.url, UMS_TOKEN: bench.token };
  const wall = (cmd, args) => {
    const t = performance.now();
    const r = spawnSync(cmd, args, { env, stdio: ["ignore", "ignore", "pipe"] });
    const ms = performance.now() - t;
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
    return ms;
  };
  const series = async (fn) => {
    await fn();
    const out = [];
    for (let i = 0; i < RUNS; i++) out.push(await fn());
    return out;
  };

  const sdk = await series(async () => {
    const t = performance.now();
    const r = await (await Unit.connect("clibench", { client })).commands.run(["true"]);
    if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`);
    return performance.now() - t;
  });
  const viaBin = await series(() => wall(UMS, ["exec", "clibench", "--", "true"]));
  const viaNode = await series(() =>
    wall("node", [join(ROOT, "packages/cli/dist/main.js"), "exec", "clibench", "--", "true"]),
  );
  const nodeAlone = await series(() => wall("node", ["-e", ""]));

  const p50 = (s) => percentile(s, 50);
  const rows = [
    ["SDK in one process (baseline)", sdk],
    ["ums exec (bin/ums launcher)", viaBin],
    ["ums exec (node dist/main.js)", viaNode],
    ["node -e '' (node start alone)", nodeAlone],
  ];
  console.log(`runs: ${RUNS} each, p50 / p90; ratio is p50 to the SDK's p50`);
  for (const [name, s] of rows) {
    console.log(
      `${name.padEnd(32)} ${fmt(p50(s)).padStart(10)} ${fmt(percentile(s, 90)).padStart(10)}  x${(p50(s) / p50(sdk)).toFixed(1)}`,
    );
  }
  const goal = p50(viaBin) <= 150 ? "OK" : "MISS";
  console.log(
    `goal: ums exec NAME -- true <= 150 ms: ${fmt(p50(viaBin))} ${goal} (CLI overhead ${fmt(p50(viaBin) - p50(sdk))})`,
  );
} finally {
  rmSync(home, { recursive: true, force: true });
  await bench.stop();
}
