#!/usr/bin/env node
// CLI start-up benchmark (issue 13): the wall time of `ums exec NAME -- true` (a new process each
// time, as a user runs it) against the same call through the SDK in one process (the baseline,
// measured in the same run on the same warm unit). The difference is what the CLI costs: node's
// start, loading the CLI and SDK, reading the config, one extra GET of the unit. Also printed:
// `node -e ''` alone (the floor no node CLI can go under). Goal: `ums exec` <= 150 ms.
// Then `ums cp NAME:FILE LOCAL` of --mib MiB against the SDK's fs read of the same file into a local
// file in one process (the baseline; goal >= 90 %), median of --cp-runs rounds.
//
//   npx tsc -b && npm run build:agent && node bench/cli.mjs [--runs 20] [--mib 256] [--cp-runs 3]
import { spawnSync } from "node:child_process";
import { createWriteStream, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { UmsClient, Unit } from "../packages/sdk/dist/index.js";
import { arg, fmt, percentile, ROOT, startBenchServer, UMS } from "./lib.mjs";

const RUNS = arg("runs", 20);
const MIB = arg("mib", 256);
const CP_RUNS = arg("cp-runs", 3);
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

  // cp: a file of MIB MiB in the unit, read back to a local file by the SDK and by `ums cp`.
  const made = await unit.commands.run(["sh", "-c", `head -c ${MIB}M /dev/urandom > /home/unit/big.bin`], {
    timeoutMs: 0,
  });
  if (made.exitCode !== 0) throw new Error(`making the file failed: ${made.stderr}`);
  const out = join(home, "big.bin");
  const mibps = (ms) => MIB / (ms / 1000);
  const check = () => {
    if (statSync(out).size !== MIB * 1024 * 1024) throw new Error(`${out} has ${statSync(out).size} bytes`);
    rmSync(out);
  };
  const sdkCp = [];
  const cliCp = [];
  for (let i = 0; i < CP_RUNS; i++) {
    let t = performance.now();
    const body = await unit.files.read("/home/unit/big.bin", { format: "stream", timeoutMs: 0 });
    await pipeline(Readable.fromWeb(body), createWriteStream(out));
    sdkCp.push(performance.now() - t);
    check();
    t = performance.now();
    wall(UMS, ["cp", "clibench:/home/unit/big.bin", out]);
    cliCp.push(performance.now() - t);
    check();
  }
  const sdkRate = mibps(p50(sdkCp));
  const cliRate = mibps(p50(cliCp));
  console.log(
    `cp of ${MIB} MiB, median of ${CP_RUNS}: SDK fs read ${sdkRate.toFixed(0)} MiB/s, ums cp ${cliRate.toFixed(0)} MiB/s`,
  );
  const ratio = cliRate / sdkRate;
  console.log(`goal: ums cp >= 90 % of the SDK read: ${(ratio * 100).toFixed(0)} % ${ratio >= 0.9 ? "OK" : "MISS"}`);
} finally {
  rmSync(home, { recursive: true, force: true });
  await bench.stop();
}
