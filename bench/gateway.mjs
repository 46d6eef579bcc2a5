#!/usr/bin/env node
// Connector gateway benchmark (issue #7): from inside a unit, requests/s and p50 latency of a small
// GET to a fake provider, two ways:
//   direct    the unit calls the fake provider itself (the physical baseline)
//   gateway   the unit calls http://<gateway address>:<gateway port>/v1/gateway/custom_api/<id>/small;
//             the gateway on the host checks the policy, applies the API key and forwards
// The fake provider runs in the same unit (units cannot reach the host's loopback), on 0.0.0.0:9000;
// the gateway reaches it at the unit's address. Client and fake are the same code both ways.
// Goals: gateway throughput >= 70% of direct; p50 overhead <= 2 ms.
//
//   npx tsc -b && npm run build:agent && node bench/gateway.mjs [--seconds 5] [--concurrency 16] [--latency 2000] [--rounds 3]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execHttp } from "../packages/server/dist/testing/exec-client.js";
import { arg, fmt, freePort, startBenchServer } from "./lib.mjs";

const SECONDS = arg("seconds", 5);
const CONCURRENCY = arg("concurrency", 16);
const LATENCY_N = arg("latency", 2000);
const ROUNDS = arg("rounds", 3);

const FAKE = `
import http from "node:http";
const body = JSON.stringify({ ok: true, items: [1, 2, 3] });
http.createServer((req, res) => {
  req.resume();
  req.on("end", () => { res.writeHead(200, { "content-type": "application/json", "content-length": body.length }); res.end(body); });
}).listen(9000, "0.0.0.0");
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
try {
  const unit = await api("POST", "/v1/units", { name: "gw-bench" });
  await inUnit(["sh", "-c", "cat > /tmp/fake.mjs"], FAKE);
  await inUnit(["sh", "-c", "cat > /tmp/load.mjs"], LOAD);
  await inUnit(["sh", "-c", "setsid /.unit/bin/node /tmp/fake.mjs </dev/null >/dev/null 2>&1 &"]);
  const net = JSON.parse(readFileSync(join(s.dataDir, "run", unit.id, "network.json"), "utf8"));
  const c = await api("POST", "/v1/oauth/connections/api_key", {
    provider: "custom_api",
    api_key: "bench-key",
    base_api_url: `http://${net.unitIp}:9000`,
    access_policy: { allow_all: true, allowed_endpoints: ["/small"] },
  });
  const run = async (label, url) => {
    const out = JSON.parse(
      await inUnit(["/.unit/bin/node", "/tmp/load.mjs", url, String(SECONDS), String(CONCURRENCY), String(LATENCY_N)]),
    );
    console.log(`${label.padEnd(8)} ${out.rps.toFixed(0).padStart(7)} req/s  p50 ${fmt(out.p50)}  p99 ${fmt(out.p99)}`);
    return out;
  };
  for (let i = 0; i < 50; i++) {
    if (
      (
        await inUnit([
          "sh",
          "-c",
          "/.unit/bin/node -e \"fetch('http://127.0.0.1:9000/').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))\" && echo up || true",
        ])
      ).includes("up")
    )
      break;
    await new Promise((r) => setTimeout(r, 100));
  }
  console.log(
    `from inside a unit, ${CONCURRENCY} connections for ${SECONDS}s; p50 over ${LATENCY_N} sequential requests`,
  );
  // Alternating rounds, best of each: the machine is shared, so single runs are noisy.
  const rounds = { direct: [], gateway: [] };
  const viaGateway = `http://${net.hostIp}:${gatewayPort}/v1/gateway/custom_api/${c.connection.id}/small`;
  for (let i = 0; i < ROUNDS; i++) {
    rounds.direct.push(await run("direct", "http://127.0.0.1:9000/small"));
    rounds.gateway.push(await run("gateway", viaGateway));
  }
  const best = (rs) => ({ rps: Math.max(...rs.map((r) => r.rps)), p50: Math.min(...rs.map((r) => r.p50)) });
  const direct = best(rounds.direct);
  const gateway = best(rounds.gateway);
  console.log(
    `best of ${ROUNDS}: direct ${direct.rps.toFixed(0)} req/s, p50 ${fmt(direct.p50)}; ` +
      `gateway ${gateway.rps.toFixed(0)} req/s, p50 ${fmt(gateway.p50)}`,
  );
  const ratio = gateway.rps / direct.rps;
  const overhead = gateway.p50 - direct.p50;
  console.log(
    `gateway throughput ${(ratio * 100).toFixed(0)}% of direct (goal >= 70%): ${ratio >= 0.7 ? "OK" : "MISS"}`,
  );
  console.log(`gateway p50 overhead ${fmt(overhead)} (goal <= 2 ms): ${overhead <= 2 ? "OK" : "MISS"}`);
} finally {
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
}
