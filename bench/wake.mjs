#!/usr/bin/env node
// Wake-up (issue #16 part 4): cold → first exec, exec of `true` on a running unit, restore until the
// unit's service answers, fork to first exec; each with a floor of the same run (a host spawn of
// `true`, the service's own restart until it answers). With `--against DIR` (another checkout of ums,
// built: `npx tsc -b && npm run build:agent`), that tree's `ums serve` runs beside this one's on the
// shared test pool and every sample of one is followed by the same sample of the other: both see the
// same load, which on a small shared host moves from run to run more than a change does.
//
//   npx tsc -b && npm run build:agent && node bench/wake.mjs [--n 20] [--against /path/to/other/ums]
import { execSync, spawnSync } from "node:child_process";
import http from "node:http";
import { resolve } from "node:path";
import { assertOwnPackages, fmt, percentile, ROOT } from "./lib.mjs";

const USAGE = "usage: node bench/wake.mjs [--n N] [--against DIR]";
let n = 20;
let against;
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === "--help" || a === "-h") {
    console.log(USAGE);
    process.exit(0);
  } else if (a === "--n" && Number.isInteger(Number(process.argv[i + 1])) && Number(process.argv[i + 1]) > 0) {
    n = Number(process.argv[++i]);
  } else if (a === "--against" && process.argv[i + 1]) {
    against = resolve(process.argv[++i]);
  } else {
    console.error(`unknown argument or missing value '${a}'\n\n${USAGE}`);
    process.exit(2);
  }
}

const trees = { this: ROOT, ...(against && { other: against }) };
if (against) assertOwnPackages(against);
const names = Object.keys(trees);
const servers = {};
const goals = { cold: 100, hot: 3, hotFetch: undefined, restore: 250, fork: 120 };
const samples = Object.fromEntries(names.map((k) => [k, { cold: [], hot: [], hotFetch: [], restore: [], fork: [] }]));
const floors = { spawn: [], serviceRestart: [] };

const time = async (f) => {
  const t = performance.now();
  await f();
  return performance.now() - t;
};
const req = (k, method, path, body) =>
  fetch(servers[k].url + path, {
    method,
    headers: { ...servers[k].auth, ...(body && { "content-type": "application/json" }) },
    ...(body && { body: JSON.stringify(body) }),
  });
const exec = async (k, name) => {
  const r = await req(k, "POST", `/v1/units/${name}/exec?cmd=true`);
  const b = Buffer.from(await r.arrayBuffer());
  if (r.status !== 200 || b.at(-2) !== 3) throw new Error(`${k}: exec in ${name}: ${r.status} ${b}`);
};
/**
 * The same exec on a kept-alive node:http connection: the service's own time, without what `fetch`
 * (undici) adds on the client's side (0.6-1.2 ms a request on this host, measured in session 30).
 */
const keptAlive = {};
const execLean = (k, name) =>
  new Promise((resolvePromise, reject) => {
    const u = new URL(servers[k].url);
    keptAlive[k] ??= new http.Agent({ keepAlive: true, maxSockets: 1 });
    const r = http.request(
      {
        agent: keptAlive[k],
        host: u.hostname,
        port: u.port,
        method: "POST",
        path: `/v1/units/${name}/exec?cmd=true`,
        headers: servers[k].auth,
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const b = Buffer.concat(chunks);
          if (res.statusCode === 200 && b.at(-2) === 3) resolvePromise();
          else reject(new Error(`${k}: exec in ${name}: ${res.statusCode} ${b}`));
        });
      },
    );
    r.on("error", reject);
    r.end();
  });
const stream = async (k, path) => {
  const text = await (await req(k, "POST", path, {})).text();
  const last = JSON.parse(text.trim().split("\n").at(-1) ?? "{}");
  if (last.type !== "complete") throw new Error(`${k}: ${path}: ${text}`);
};
const serviceAnswers = async (k, unit = "data") => {
  for (const end = Date.now() + 10_000; Date.now() < end; ) {
    const r = await req(k, "GET", `/v1/units/${unit}/`).catch(() => undefined);
    if (r) await r.arrayBuffer();
    if (r?.status === 200) return;
    await new Promise((res) => setTimeout(res, 2));
  }
  throw new Error(`${k}: the service did not answer within 10 s`);
};
/** Each sample of every tree in turn, the order swapped every other round. */
const interleaved = async (rounds, fn) => {
  for (let i = 0; i < rounds; i++) for (const k of i % 2 ? names : [...names].reverse()) await fn(k, i);
};

try {
  for (const [k, dir] of Object.entries(trees)) {
    const lib = await import(`${dir}/bench/lib.mjs`);
    servers[k] = await lib.startBenchServer({ org: `wake-${k}`, env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
  }
  for (const k of names) {
    for (let i = 0; i < n; i++) {
      const r = await req(k, "POST", "/v1/units", { name: `c${i}` });
      if (r.status !== 201) throw new Error(`${k}: create ${r.status} ${await r.text()}`);
    }
  }
  await interleaved(n, async (k, i) => samples[k].cold.push(await time(() => exec(k, `c${i}`))));
  await interleaved(5, (k) => exec(k, "c0"));
  await interleaved(n * 4, async (k) => samples[k].hotFetch.push(await time(() => exec(k, "c0"))));
  await interleaved(5, (k) => execLean(k, "c0"));
  await interleaved(n * 4, async (k) => samples[k].hot.push(await time(() => execLean(k, "c0"))));
  for (let i = 0; i < n * 4; i++) floors.spawn.push(await time(async () => spawnSync("true")));
  for (const k of names) {
    await req(k, "POST", "/v1/units", { name: "data" });
    const svc = await req(k, "PUT", "/v1/units/data/services/web?duration=0", {
      cmd: "python3",
      args: ["-m", "http.server", "8080", "--directory", "/home/unit"],
      http_port: 8080,
    });
    if (svc.status !== 200) throw new Error(`${k}: service ${svc.status} ${await svc.text()}`);
    await serviceAnswers(k);
    for (let i = 0; i < n; i++) await stream(k, "/v1/units/data/checkpoint");
  }
  await interleaved(n, async (k, i) =>
    samples[k].restore.push(
      await time(async () => {
        await stream(k, `/v1/units/data/checkpoints/v${i}/restore`);
        await serviceAnswers(k);
      }),
    ),
  );
  for (let i = 0; i < n; i++) {
    floors.serviceRestart.push(
      await time(async () => {
        await (await req("this", "POST", "/v1/units/data/services/web/restart?duration=0")).text();
        await serviceAnswers("this");
      }),
    );
  }
  await interleaved(n, async (k, i) => {
    samples[k].fork.push(
      await time(async () => {
        const r = await req(k, "POST", "/v1/units", { name: `f${i}`, from: { unit: "data", checkpoint: "v0" } });
        if (r.status !== 201) throw new Error(`${k}: fork ${r.status} ${await r.text()}`);
        await exec(k, `f${i}`);
      }),
    );
    // Untimed: the fork's service (python3, ~70-90 ms of CPU to its first answer here) has started
    // too, so that the next sample's fork does not share the host's CPU with this one's service.
    await serviceAnswers(k, `f${i}`);
  });
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  for (const a of Object.values(keptAlive)) a.destroy();
  for (const k of names) await servers[k]?.stop();
}

const load = execSync("uptime").toString().trim();
console.log(`\nums wake-up benchmark, p50 (p90) of ${n} (exec on a running unit: ${n * 4}); ${load}`);
const labels = {
  cold: "cold → first exec of true",
  hot: "exec of true on a running unit (node:http, kept-alive connection)",
  hotFetch: "exec of true on a running unit (fetch, as the SDK sends it)",
  restore: "restore until the service answers",
  fork: "fork to first exec",
};
const floorOf = {
  hot: ["host spawn of true", floors.spawn],
  hotFetch: ["host spawn of true", floors.spawn],
  restore: ["the service's own restart until it answers", floors.serviceRestart],
};
for (const [f, label] of Object.entries(labels)) {
  const cols = names.map((k) => {
    const s = samples[k][f];
    return `${k === "this" ? "this tree" : against}: ${fmt(percentile(s, 50))} (${fmt(percentile(s, 90))})`;
  });
  const mine = percentile(samples.this[f], 50);
  const floor = floorOf[f];
  const ratio = floor
    ? `; ${(mine / percentile(floor[1], 50)).toFixed(2)}x ${floor[0]} (${fmt(percentile(floor[1], 50))})`
    : "";
  const goal = goals[f] === undefined ? "" : `  [goal <= ${goals[f]} ms: ${mine <= goals[f] ? "PASS" : "MISS"}]`;
  console.log(`- ${label}: ${cols.join(" | ")}${goal}${ratio}`);
}
