#!/usr/bin/env node
// Services benchmark (issue 4, services): a service restart through the API, from the
// `POST /v1/units/{name}/services/{service}/restart` call until its `started` event arrives, with
// its ratio to physical baselines measured in the same run on the same unit:
//   bare restart in the unit   a node process in the unit does the same stop + start itself: SIGTERM
//                              to the process group, wait for the exit, fork/exec the same command
//   bare restart on the host   the same script run by the host's node, outside any unit
// (`runc exec` into a unit is no baseline here: it cannot join the unit's host-owned network
// namespace from the unit's user namespace, EPERM.)
//
//   npx tsc -b && npm run build:agent && node bench/services.mjs [--n 50]
import { execFileSync } from "node:child_process";
import { fmt, percentile, startBenchServer, timeIt } from "./lib.mjs";

const N = Number(process.argv[process.argv.indexOf("--n") + 1]) || 50;
const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const { url, auth } = bench;
const json = (method, path, body) =>
  fetch(url + path, {
    method,
    headers: { ...auth, "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
const exec = async (cmd) => {
  const q = cmd.map((c) => `cmd=${encodeURIComponent(c)}`).join("&");
  const res = await fetch(`${url}/v1/units/svc/exec?${q}`, { method: "POST", headers: auth });
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200 || body.at(-2) !== 3) throw new Error(`exec failed: ${res.status} ${body}`);
  // Non-TTY frames: [stream id, …data] per chunk; keep stdout (1).
  return body;
};

/** One restart: resolves when the `started` line arrives. */
async function restart() {
  const res = await fetch(`${url}/v1/units/svc/services/s/restart?duration=0`, { method: "POST", headers: auth });
  if (res.status !== 200) throw new Error(`restart: ${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`restart stream ended without 'started': ${text}`);
    text += dec.decode(value, { stream: true });
    if (text.includes('"type":"started"')) break;
  }
  await reader.cancel().catch(() => {});
}

// The same stop + start, done by a process in the unit itself (times printed as JSON, ms).
const BARE = `const {spawn}=require("child_process");const n=+process.argv[1];const out=[];
const go=()=>{const c=spawn("sleep",["1000"],{detached:true,stdio:["ignore","pipe","pipe"]});return new Promise(r=>c.once("spawn",()=>r(c)))};
(async()=>{let c=await go();for(let i=0;i<n;i++){const t=performance.now();const old=c;const ex=new Promise(r=>old.once("exit",r));
process.kill(-old.pid,"SIGTERM");await ex;c=await go();out.push(performance.now()-t)}process.kill(-c.pid,"SIGKILL");console.log(JSON.stringify(out))})()`;

let ok = true;
const rows = [];
try {
  let r = await json("POST", "/v1/units", { name: "svc" });
  if (r.status !== 201) throw new Error(`create ${r.status}`);
  r = await json("PUT", "/v1/units/svc/services/s?duration=0", { cmd: "sleep", args: ["1000"], needs: [] });
  if (r.status !== 200) throw new Error(`put ${r.status} ${await r.text()}`);
  for (let i = 0; i < 5; i++) await restart(); // warm-up
  const api = [];
  for (let i = 0; i < N; i++) api.push(await timeIt(restart));

  const out = (await exec(["/.unit/bin/node", "-e", BARE, String(N)])).toString("latin1");
  const bare = JSON.parse(out.slice(out.indexOf("["), out.lastIndexOf("]") + 1));

  const host = JSON.parse(execFileSync(process.execPath, ["-e", BARE, String(N)]).toString());
  const p50 = percentile(api, 50);
  rows.push(
    `- service restart (API call → started): p50 ${fmt(p50)}  p99 ${fmt(percentile(api, 99))}  [goal <= 20 ms: ${p50 <= 20 ? "PASS" : "MISS"}]`,
    `    ${(p50 / percentile(bare, 50)).toFixed(2)}x bare restart in the unit (${fmt(percentile(bare, 50))}); ` +
      `${(p50 / percentile(host, 50)).toFixed(2)}x bare restart on the host (${fmt(percentile(host, 50))})`,
  );
} catch (err) {
  console.error(err);
  ok = false;
} finally {
  await bench.stop().catch((err) => console.error(err));
}
console.log("\nums services benchmark (ratios: this figure's p50 / baseline p50, same host, same run)");
for (const row of rows) console.log(row);
if (!ok) process.exitCode = 1;
