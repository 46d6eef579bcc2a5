#!/usr/bin/env node
// Checkpoint benchmark (issue "Checkpoints"): with --mib MiB of files in a unit (default 1024: half
// one random file, half many small files), times
//   checkpoint API call to `complete` (p50), and how long the unit was frozen
//   restore to running with one service back (p50): the restore call, then until the unit's
//   service (a python3 HTTP server on its http_port) answers through the proxy
//   fork to first exec (p50)
// against, in the same run, the same data saved with `tar | zstd -1` and a bare
// `btrfs subvolume snapshot -r` of the unit's rootfs; the restore also against the service's own
// restart until it answers (no restore), and the fork against a new unit's cold boot + first exec.
//
//   npx tsc -b && npm run build:agent && node bench/checkpoint.mjs [--mib 1024] [--n 10]
import { execFileSync, spawnSync } from "node:child_process";
import { join } from "node:path";
import { fmt, percentile, startBenchServer, timeIt } from "./lib.mjs";

const arg = (flag, dflt) => Number(process.argv[process.argv.indexOf(flag) + 1]) || dflt;
const MIB = arg("--mib", 1024);
const N = arg("--n", 10);
const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const { url, auth } = bench;
const req = (method, path, body) =>
  fetch(url + path, {
    method,
    headers: { ...auth, ...(body && { "content-type": "application/json" }) },
    ...(body && { body: JSON.stringify(body) }),
  });
const exec = async (name, script) => {
  const res = await fetch(`${url}/v1/units/${name}/exec?cmd=sh&cmd=-c&cmd=${encodeURIComponent(script)}`, {
    method: "POST",
    headers: auth,
  });
  const body = Buffer.from(await res.arrayBuffer());
  if (body.at(-2) !== 3 || body.at(-1) !== 0) throw new Error(`exec failed: ${body.toString("latin1").slice(-300)}`);
};
const stream = async (path, body) => {
  const r = await req("POST", path, body ?? {});
  const lines = (await r.text())
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const last = lines.at(-1);
  if (last?.type !== "complete") throw new Error(`${path}: ${JSON.stringify(last)}`);
  return lines;
};

const rows = [];
try {
  await req("POST", "/v1/units", { name: "data" });
  const half = Math.floor(MIB / 2);
  const small = Math.floor((half * 1024) / 16); // 16 KiB files
  process.stderr.write(`writing ${MIB} MiB into the unit (${half} MiB random + ${small} files of 16 KiB)...\n`);
  await exec(
    "data",
    `head -c ${half}M /dev/urandom > /home/unit/big && mkdir -p /home/unit/small && python3 -c "
import os
blob = os.urandom(16384)
for i in range(${small}):
    d = '/home/unit/small/%03d' % (i % 500)
    os.makedirs(d, exist_ok=True)
    open('%s/f%06d' % (d, i), 'wb').write(blob)
" && sync`,
  );
  await exec("data", "setsid sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 < /dev/null &");
  // One service, carried by every checkpoint: back after each restore.
  const svc = await req("PUT", "/v1/units/data/services/web?duration=0", {
    cmd: "python3",
    args: ["-m", "http.server", "8080", "--directory", "/home/unit"],
    http_port: 8080,
  });
  if (svc.status !== 200) throw new Error(`service: ${svc.status} ${await svc.text()}`);
  const serviceAnswers = async () => {
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
      const r = await req("GET", "/v1/units/data/").catch(() => undefined);
      if (r) await r.arrayBuffer();
      if (r?.status === 200) return;
      await new Promise((res) => setTimeout(res, 2));
    }
    throw new Error("the service did not answer within 10 s of the restore");
  };
  await serviceAnswers();
  const unit = await (await req("GET", "/v1/units/data")).json();
  const rootfs = join(bench.pool, "units", unit.id, "rootfs");

  const cp = [];
  const frozen = [];
  for (let i = 0; i < N; i++) {
    let lines;
    cp.push(await timeIt(async () => (lines = await stream("/v1/units/data/checkpoint"))));
    const f = /frozen for ([\d.]+) ms/.exec(lines.map((l) => l.data ?? "").join(" "));
    if (f) frozen.push(Number(f[1]));
  }
  const bare = [];
  for (let i = 0; i < N; i++) {
    const dst = join(bench.pool, "units", unit.id, `bare-${i}`);
    bare.push(
      await timeIt(async () => spawnSync("btrfs", ["subvolume", "snapshot", "-r", rootfs, dst], { stdio: "ignore" })),
    );
    spawnSync("btrfs", ["subvolume", "delete", dst], { stdio: "ignore" });
  }
  const tarMs = await timeIt(async () =>
    execFileSync("sh", ["-c", `tar -C ${rootfs}/home/unit -cf - . | zstd -1 -q -T0 -o /dev/null -f`], {
      stdio: "ignore",
    }),
  );
  const baselines = [
    ["bare btrfs snapshot", bare],
    ["tar | zstd -1", [tarMs]],
  ];
  rows.push({ name: "checkpoint (API call to complete)", s: cp, goal: 100, baselines });
  rows.push({ name: "time the unit was frozen", s: frozen, goal: 50, baselines });

  const restore = [];
  for (let i = 0; i < N; i++) {
    restore.push(
      await timeIt(async () => {
        await stream(`/v1/units/data/checkpoints/v${i}/restore`);
        await serviceAnswers();
      }),
    );
  }
  // Issue #16: the floors of the same run. A restore cannot beat its service's own start (python3
  // and its http.server imports) on a unit that runs: the service restarted (stop, start, until it
  // answers through the proxy), no restore.
  const svcRestart = [];
  for (let i = 0; i < N; i++) {
    svcRestart.push(
      await timeIt(async () => {
        await (await req("POST", "/v1/units/data/services/web/restart?duration=0")).text();
        await serviceAnswers();
      }),
    );
  }
  rows.push({
    name: "restore to running with one service answering",
    s: restore,
    goal: 250,
    baselines: [["service restart until it answers, no restore", svcRestart], ...baselines],
  });

  const fork = [];
  for (let i = 0; i < N; i++) {
    fork.push(
      await timeIt(async () => {
        const r = await req("POST", "/v1/units", { name: `fork${i}`, from: { unit: "data", checkpoint: "v0" } });
        if (r.status !== 201) throw new Error(`fork: ${r.status} ${await r.text()}`);
        await exec(`fork${i}`, "true");
      }),
    );
  }
  // A fork's floor: a new unit's cold boot and first exec (a fork is a snapshot and the same boot).
  const coldNew = [];
  for (let i = 0; i < N; i++) {
    coldNew.push(
      await timeIt(async () => {
        const r = await req("POST", "/v1/units", { name: `cold${i}` });
        if (r.status !== 201) throw new Error(`create: ${r.status} ${await r.text()}`);
        await exec(`cold${i}`, "true");
      }),
    );
  }
  rows.push({
    name: "fork to first exec",
    s: fork,
    goal: 120,
    baselines: [["a new unit's create + cold boot + first exec", coldNew], ...baselines],
  });
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await bench.stop();
}

console.log(`\nums checkpoint benchmark, ${MIB} MiB of files in the unit (ratios: p50 / baseline p50, same run)`);
for (const r of rows) {
  const p50 = percentile(r.s, 50);
  const ratios = r.baselines.map(
    ([label, b]) => `${(p50 / percentile(b, 50)).toFixed(2)}x ${label} (${fmt(percentile(b, 50))})`,
  );
  console.log(
    `- ${r.name}: p50 ${fmt(p50)} p99 ${fmt(percentile(r.s, 99))}  [goal <= ${r.goal} ms: ${p50 <= r.goal ? "PASS" : "MISS"}]\n    ${ratios.join("; ")}`,
  );
}
