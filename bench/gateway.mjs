#!/usr/bin/env node
// Connector gateway benchmark (issues #7 and #16 part 3): from inside a unit, requests/s and p50
// latency of a small GET to a fake provider, five ways:
//   in-unit direct    the unit calls a fake provider in the unit itself (127.0.0.1:9000): issue #7's
//                     physical baseline
//   in-unit gateway   the unit calls http://<gateway address>:<gateway port>/v1/gateway/custom_api/<id>/small;
//                     the gateway on the host checks the policy, applies the API key and forwards to
//                     the in-unit provider at the unit's address (issue #7's figure)
//   net direct        the unit calls a fake provider on a network namespace this bench makes (the
//                     fake internet of the tests: TEST-NET-3 addresses, routed through the host)
//   net nginx         the unit calls nginx (Debian's package, in that namespace, one worker,
//                     keep-alive upstream), which adds the same credential (an Authorization
//                     header) and forwards to that provider
//   net gateway       the gateway as above, its connection's base URL that provider
// Units cannot reach the host's loopback or its other ports, so the reference proxy runs where the
// unit may go: both proxies are one veth away from the unit and one from the provider.
// Goals: issue #7: in-unit gateway >= 70% of in-unit direct's req/s, p50 overhead <= 2 ms;
// issue #16 part 3: net gateway >= 90% of net nginx's req/s, p50 overhead <= 0.5 ms.
//
//   npx tsc -b && npm run build:agent && node bench/gateway.mjs [--seconds 5] [--concurrency 16] [--latency 2000] [--rounds 3]
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execHttp } from "../packages/server/dist/testing/exec-client.js";
import { startFakeInternet } from "../packages/server/dist/testing/fake-internet.js";
import { arg, children, fmt, freePort, onSignal, startBenchServer, startNginx } from "./lib.mjs";

const SECONDS = arg("seconds", 5);
const CONCURRENCY = arg("concurrency", 16);
const LATENCY_N = arg("latency", 2000);
const ROUNDS = arg("rounds", 3);
const PROVIDER_PORT = 9000;

// The fake provider: answers 200 with a small JSON body, 401 without the bench's credential (so
// that every proxy is shown to have applied it); $LISTEN_ADDR or all addresses, port 9000.
const FAKE = `
import http from "node:http";
const body = JSON.stringify({ ok: true, items: [1, 2, 3] });
http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const ok = req.headers.authorization === "Bearer bench-key" || req.url === "/unauthenticated";
    res.writeHead(ok ? 200 : 401, { "content-type": "application/json", "content-length": body.length });
    res.end(body);
  });
}).listen(${PROVIDER_PORT}, process.env.LISTEN_ADDR || "0.0.0.0");
`;
// Runs inside the unit: p50 of sequential requests, then fixed-concurrency throughput.
const LOAD = `
import http from "node:http";
const [url, seconds, concurrency, n] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4]), Number(process.argv[5])];
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const one = () => new Promise((resolve, reject) => {
  const t = performance.now();
  http.get(url, { agent }, (res) => {
    res.resume();
    res.on("end", () => res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error("status " + res.statusCode)));
  }).on("error", reject);
});
for (let i = 0; i < 200; i++) await one();
const lat = [];
for (let i = 0; i < n; i++) lat.push(await one());
lat.sort((a, b) => a - b);
const end = performance.now() + seconds * 1000;
let count = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: concurrency }, async () => { while (performance.now() < end) { await one(); count++; } }));
const rps = count / ((performance.now() - t0) / 1000);
agent.destroy();
process.stdout.write(JSON.stringify({ p50: lat[Math.floor(lat.length / 2)], p99: lat[Math.floor(lat.length * 0.99)], rps }));
`;

const dir = mkdtempSync(join(tmpdir(), "ums-gw-bench-"));
const cfg = join(dir, "connectors.json");
writeFileSync(cfg, JSON.stringify({ allowPrivateBaseUrls: true }));
const gatewayPort = await freePort();
const s = await startBenchServer({ env: { UMS_CONNECTORS_CONFIG: cfg, UMS_GATEWAY_PORT: String(gatewayPort) } });
const api = async (method, path, body) => {
  const r = await fetch(s.url + path, {
    method,
    headers: { ...s.auth, ...(body && { "content-type": "application/json" }) },
    ...(body && { body: JSON.stringify(body) }),
  });
  const json = await r.json().catch(() => undefined);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
  return json;
};
const inUnit = async (cmd, stdin) => {
  const r = await execHttp(s.url, s.token, "gw-bench", cmd, stdin === undefined ? {} : { stdin });
  if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")}: exit ${r.exitCode}: ${r.stderr}`);
  return r.stdout.toString();
};
// Stopped once, at the end or on Ctrl-C / SIGTERM (with the bench server: lib.mjs's onSignal).
let fake;
let nginx;
let netProvider;
let cleaning;
const cleanup = () =>
  (cleaning ??= (async () => {
    nginx?.stop();
    if (netProvider && netProvider.exitCode === null) netProvider.kill("SIGKILL");
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  })());
onSignal(cleanup);
try {
  const unit = await api("POST", "/v1/units", { name: "gw-bench" });
  await inUnit(["sh", "-c", "cat > /tmp/fake.mjs"], FAKE);
  await inUnit(["sh", "-c", "cat > /tmp/load.mjs"], LOAD);
  await inUnit(["sh", "-c", "setsid /.unit/bin/node /tmp/fake.mjs </dev/null >/dev/null 2>&1 &"]);
  const net = JSON.parse(readFileSync(join(s.dataDir, "run", unit.id, "network.json"), "utf8"));

  // The namespace with the other provider and nginx (testing/fake-internet.ts: a veth from the
  // host, TEST-NET-3 addresses on its loopback, routed by the host; units reach those ranges).
  fake = await startFakeInternet({ names: ["provider.test", "nginx.test"] });
  const providerIp = fake.hosts["provider.test"];
  const nginxIp = fake.hosts["nginx.test"];
  writeFileSync(join(dir, "fake.mjs"), FAKE);
  netProvider = spawn("ip", ["netns", "exec", fake.netns, process.execPath, join(dir, "fake.mjs")], {
    env: { ...process.env, LISTEN_ADDR: providerIp },
    stdio: ["ignore", "ignore", "inherit"],
  });
  children.add(netProvider);
  nginx = await startNginx({
    upstream: `${providerIp}:${PROVIDER_PORT}`,
    listen: `${nginxIp}:8080`,
    netns: fake.netns,
    headers: { Authorization: "Bearer bench-key" },
  });

  const connection = async (base) =>
    (
      await api("POST", "/v1/oauth/connections/api_key", {
        provider: "custom_api",
        api_key: "bench-key",
        base_api_url: base,
        access_policy: { allow_all: true, allowed_endpoints: ["/small"] },
      })
    ).connection.id;
  const viaGateway = (id) => `http://${net.hostIp}:${gatewayPort}/v1/gateway/custom_api/${id}/small`;
  const ways = [
    ["in-unit direct", `http://127.0.0.1:${PROVIDER_PORT}/unauthenticated`],
    ["in-unit gateway", viaGateway(await connection(`http://${net.unitIp}:${PROVIDER_PORT}`))],
    ["net direct", `http://${providerIp}:${PROVIDER_PORT}/unauthenticated`],
    ["net nginx", `${nginx.url}/small`],
    ["net gateway", viaGateway(await connection(`http://${providerIp}:${PROVIDER_PORT}`))],
  ];
  const run = async (label, url) => {
    const out = JSON.parse(
      await inUnit(["/.unit/bin/node", "/tmp/load.mjs", url, String(SECONDS), String(CONCURRENCY), String(LATENCY_N)]),
    );
    console.log(
      `${label.padEnd(16)} ${out.rps.toFixed(0).padStart(7)} req/s  p50 ${fmt(out.p50)}  p99 ${fmt(out.p99)}`,
    );
    return out;
  };
  // Each way answers 200 from inside the unit before it is measured (the in-unit provider has started,
  // the proxies applied the credential).
  for (const [label, url] of ways) {
    const probe = `fetch(${JSON.stringify(url)}).then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))`;
    for (let i = 0; ; i++) {
      const r = await execHttp(s.url, s.token, "gw-bench", ["/.unit/bin/node", "-e", probe]);
      if (r.exitCode === 0) break;
      if (i >= 50) throw new Error(`${label}: ${url} does not answer 200 from inside the unit`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  console.log(
    `from inside a unit, ${CONCURRENCY} connections for ${SECONDS}s; p50 over ${LATENCY_N} sequential requests`,
  );
  // Rounds of every way one after the other, the best of each: the machine is shared, so single
  // runs are noisy.
  const rounds = Object.fromEntries(ways.map(([label]) => [label, []]));
  for (let i = 0; i < ROUNDS; i++) {
    for (const [label, url] of ways) rounds[label].push(await run(label, url));
  }
  const best = (rs) => ({ rps: Math.max(...rs.map((r) => r.rps)), p50: Math.min(...rs.map((r) => r.p50)) });
  const b = Object.fromEntries(Object.entries(rounds).map(([k, v]) => [k, best(v)]));
  console.log(`\nbest of ${ROUNDS}:`);
  for (const [label] of ways)
    console.log(`- ${label.padEnd(16)} ${b[label].rps.toFixed(0).padStart(7)} req/s, p50 ${fmt(b[label].p50)}`);
  const compare = (what, base, goals) => {
    const ratio = b[what].rps / b[base].rps;
    const overhead = b[what].p50 - b[base].p50;
    const verdict = (ok) => (goals ? `: ${ok ? "PASS" : "MISS"}` : "");
    console.log(
      `- ${what}: ${(ratio * 100).toFixed(0)}% of ${base}'s req/s${goals ? ` (goal >= ${goals.ratio * 100}%)` : ""}` +
        `${verdict(goals && ratio >= goals.ratio)}; p50 overhead ${fmt(overhead)}` +
        `${goals ? ` (goal <= ${goals.overheadMs} ms)` : ""}${verdict(goals && overhead <= goals.overheadMs)}`,
    );
  };
  console.log("\nissue #7, against the provider in the unit itself:");
  compare("in-unit gateway", "in-unit direct", { ratio: 0.7, overheadMs: 2 });
  console.log("issue #16 part 3, against nginx adding the same header (both one hop from the unit and the provider):");
  compare("net gateway", "net nginx", { ratio: 0.9, overheadMs: 0.5 });
  compare("net nginx", "net direct");
  compare("net gateway", "net direct");
} finally {
  await s.stop();
  await cleanup();
}
