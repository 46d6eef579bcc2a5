#!/usr/bin/env node
// Proxy benchmark (issue 4, spec 4.1 and 5): requests/s and p50 latency of a small GET to an HTTP
// server inside a unit (the python app of the proxy tests, port 8080), three ways:
//   direct      from the host to the unit's address (the physical baseline)
//   /v1 proxy   GET /v1/units/{name}/small with the bearer token
//   unit URL    GET /small with Host: <name>-<random>.units.localhost:<port> and the bearer token
// and three references: an authenticated API read (no proxy), a bare node:http proxy (no ums), and
// nginx (Debian's package, its own instance started here: one worker, keep-alive to the unit,
// setting the same forwarding fields ums sets).
// Each runs for a fixed time at a fixed concurrency over keep-alive connections (autocannon style);
// ratios are against direct. Goals: proxied throughput >= 70% of direct (issue 4); issue #16 part
// 2: >= 90% of nginx's requests/s and download MiB/s, p50 within 0.3 ms of nginx's. Then a
// download of --mib MiB (default 100) through each, one at a time, --downloads times (median).
//
//   npx tsc -b && npm run build:agent && node bench/proxy.mjs [--seconds 5] [--concurrency 16] [--mib 100] [--downloads 3]
import { spawn } from "node:child_process";
import http from "node:http";
import { arg, percentile, startBenchServer, startNginx } from "./lib.mjs";

const SECONDS = arg("seconds", 5);
const CONCURRENCY = arg("concurrency", 16);
const MIB = arg("mib", 100);
const DOWNLOADS = arg("downloads", 3);

/** Fixed-concurrency load for `seconds`: each worker sends the next request when its last one ends. */
async function load(label, url, headers, concurrency = CONCURRENCY, seconds = SECONDS) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const one = () =>
    new Promise((resolve, reject) => {
      const t = performance.now();
      const req = http.get(url, { agent, headers }, (res) => {
        res.on("data", () => {});
        res.on("end", () =>
          res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error(`${label}: ${res.statusCode}`)),
        );
      });
      req.on("error", reject);
    });
  // Warm-up: connections open, caches hot.
  const warmEnd = performance.now() + 500;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < warmEnd) await one();
    }),
  );
  const samples = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) samples.push(await one());
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  agent.destroy();
  return {
    label,
    rps: samples.length / elapsed,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    n: samples.length,
  };
}

// A bare node:http reverse proxy (keep-alive to the unit, no auth, no routing, no header rules) in
// a process of its own: what any proxy written on node:http pays on this host for the extra hop.
const BARE_PROXY = `
const http = require("node:http");
const agent = new http.Agent({ keepAlive: true });
const [host, port] = process.argv.slice(1);
http.createServer((req, res) => {
  const up = http.request({ agent, host, port, method: req.method, path: req.url, headers: req.headers }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    r.pipe(res);
  });
  up.on("error", () => res.destroy());
  req.pipe(up);
}).listen(0, "127.0.0.1", function () { console.log(this.address().port); });
`;

async function startBareProxy(host, port) {
  const child = spawn(process.execPath, ["-e", BARE_PROXY, host, String(port)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const listening = await new Promise((resolve, reject) => {
    child.stdout.once("data", (d) => resolve(Number(String(d).trim())));
    child.once("exit", (code) => reject(new Error(`bare proxy exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${listening}`, stop: () => child.kill("SIGTERM") };
}

/** MiB/s of one download of --mib MiB from `url` (the median of --downloads), read and dropped. */
async function download(label, url, headers) {
  const rates = [];
  for (let i = 0; i < DOWNLOADS; i++) {
    const t = performance.now();
    const bytes = await new Promise((resolve, reject) => {
      http
        .get(url, { headers, agent: false }, (res) => {
          if (res.statusCode !== 200) return reject(new Error(`${label}: ${res.statusCode}`));
          let n = 0;
          res.on("data", (d) => {
            n += d.length;
          });
          res.on("end", () => resolve(n));
          res.on("error", reject);
        })
        .on("error", reject);
    });
    if (bytes !== MIB * 1048576) throw new Error(`${label}: ${bytes} bytes, not ${MIB} MiB`);
    rates.push(MIB / ((performance.now() - t) / 1000));
  }
  return { label, mibs: percentile(rates, 50) };
}

const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const { url, token, auth } = bench;
const results = [];
const downloads = [];
/** One request at a time (no queueing behind other requests): what a proxy adds to one request. */
const alone = [];
try {
  const { startUnitApp } = await import("../packages/server/dist/testing/unit-app.js");
  const { execHttp } = await import("../packages/server/dist/testing/exec-client.js");
  const created = await fetch(`${url}/v1/units`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name: "web" }),
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
  const unitUrl = new URL((await created.json()).url);
  await startUnitApp(url, token, "web");
  const ipOut = await execHttp(url, token, "web", [
    "python3",
    "-c",
    [
      "import fcntl, socket, struct",
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
      "names = [n for _, n in socket.if_nameindex() if n != 'lo']",
      "print(socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, struct.pack('256s', names[0].encode()))[20:24]))",
    ].join("\n"),
  ]);
  const ip = ipOut.stdout.toString().trim();
  if (!/^\d+\.\d+\.\d+\.\d+$/.test(ip)) throw new Error(`could not learn the unit's address: ${ipOut.stderr}`);
  process.stderr.write(`unit address ${ip}; ${SECONDS}s per run at concurrency ${CONCURRENCY}\n`);

  results.push(await load("direct (host → unit address)", `http://${ip}:8080/small`, {}));
  results.push(await load("/v1/units/{name}/ proxy", `${url}/v1/units/web/small`, auth));
  results.push(await load("unit URL (Host routing)", `${url}/small`, { ...auth, host: unitUrl.host }));
  const half = Math.max(1, SECONDS / 2);
  alone.push(await load("direct", `http://${ip}:8080/small`, {}, 1, half));
  alone.push(await load("/v1 proxy", `${url}/v1/units/web/small`, auth, 1, half));
  alone.push(await load("unit URL", `${url}/small`, { ...auth, host: unitUrl.host }, 1, half));
  // Not a proxy: the API's own cost of an authenticated request that reads the unit (token + unit lookup).
  results.push(await load("reference: GET /v1/units/{name} (no proxy)", `${url}/v1/units/web`, auth));
  const bare = await startBareProxy(ip, 8080);
  try {
    results.push(await load("reference: bare node:http proxy (no ums)", `${bare.url}/small`, {}));
  } finally {
    bare.stop();
  }
  // The same work for the unit's app as ums asks of it: the client's Host and the four forwarding
  // fields ums sets on every request it forwards (api/proxy/headers.ts), so that the app parses as
  // many header lines behind either proxy (python's http.server pays per line).
  const nginx = await startNginx({
    upstream: `${ip}:8080`,
    headers: {
      Host: "$http_host",
      "X-Forwarded-For": "$proxy_add_x_forwarded_for",
      "X-Forwarded-Host": "$http_host",
      "X-Forwarded-Proto": "$scheme",
      Forwarded: 'for=$remote_addr;host=\\"$http_host\\";proto=$scheme',
    },
  });
  try {
    results.push(await load("reference: nginx (1 worker, keep-alive to the unit)", `${nginx.url}/small`, {}));
    alone.push(await load("nginx", `${nginx.url}/small`, {}, 1, Math.max(1, SECONDS / 2)));
    const path = `/bytes/${MIB * 1048576}`;
    downloads.push(await download("direct", `http://${ip}:8080${path}`, {}));
    downloads.push(await download("/v1 proxy", `${url}/v1/units/web${path}`, auth));
    downloads.push(await download("unit URL", `${url}${path}`, { ...auth, host: unitUrl.host }));
    downloads.push(await download("nginx", `${nginx.url}${path}`, {}));
  } finally {
    nginx.stop();
  }
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await bench.stop().catch((err) => console.error(err));
}

if (results.length === 6) {
  const [direct] = results;
  console.log(`\nums proxy benchmark (small GET, ${SECONDS}s each, concurrency ${CONCURRENCY}, keep-alive)`);
  for (const r of results) {
    const ratio = r.rps / direct.rps;
    const goal =
      r === direct
        ? "baseline"
        : results.indexOf(r) >= 3
          ? "reference"
          : `goal >= 70% of direct: ${ratio >= 0.7 ? "PASS" : "MISS"}`;
    console.log(
      `- ${r.label}: ${r.rps.toFixed(0)} req/s (${(ratio * 100).toFixed(0)}% of direct), p50 ${r.p50.toFixed(2)} ms (${(r.p50 / direct.p50).toFixed(2)}x direct), p99 ${r.p99.toFixed(2)} ms, n=${r.n}  [${goal}]`,
    );
  }
  const nginx = results[5];
  console.log("\nagainst nginx (issue #16 part 2: >= 90% of its req/s, p50 within 0.3 ms):");
  for (const r of results.slice(1, 3)) {
    const ratio = r.rps / nginx.rps;
    const extra = r.p50 - nginx.p50;
    console.log(
      `- ${r.label}: ${(ratio * 100).toFixed(0)}% of nginx's req/s [${ratio >= 0.9 ? "PASS" : "MISS"}], p50 ${extra >= 0 ? "+" : ""}${extra.toFixed(2)} ms [${extra <= 0.3 ? "PASS" : "MISS"}]`,
    );
  }
}
if (alone.length === 4) {
  const nginx = alone[3];
  console.log("\none request at a time (concurrency 1): p50, and what each adds over nginx's (goal: within 0.3 ms):");
  for (const r of alone) {
    const extra = r.p50 - nginx.p50;
    const goal = r === nginx || r === alone[0] ? "" : ` [${extra <= 0.3 ? "PASS" : "MISS"}]`;
    console.log(
      `- ${r.label}: p50 ${r.p50.toFixed(3)} ms, p99 ${r.p99.toFixed(3)} ms, ${r.rps.toFixed(0)} req/s${r === nginx ? "" : `, ${extra >= 0 ? "+" : ""}${extra.toFixed(3)} ms over nginx`}${goal}`,
    );
  }
}
if (downloads.length === 4) {
  const [direct, , , nginx] = downloads;
  console.log(`\ndownload of ${MIB} MiB (median of ${DOWNLOADS}; goal >= 90% of nginx's MiB/s):`);
  for (const d of downloads) {
    const vs = d === nginx || d === direct ? "" : ` [${d.mibs / nginx.mibs >= 0.9 ? "PASS" : "MISS"}]`;
    console.log(
      `- ${d.label}: ${d.mibs.toFixed(0)} MiB/s (${((d.mibs / direct.mibs) * 100).toFixed(0)}% of direct, ${((d.mibs / nginx.mibs) * 100).toFixed(0)}% of nginx)${vs}`,
    );
  }
}
