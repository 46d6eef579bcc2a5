#!/usr/bin/env node
// Network egress benchmark (issue #6). Everything runs against a fake internet the bench creates
// (a network namespace with a DNS server and HTTP servers on TEST-NET addresses); nothing leaves
// the machine. Figures, each with its physical baseline measured in the same run:
//   dns       p50 of a lookup from inside a unit through its policy resolver (enforced policy, the
//             name allowed), vs the same query sent directly to the fake upstream (policy open).
//             Goal: overhead <= 1 ms. Also the cost of the first lookup of a name (one nft call).
//   http      p50 of TCP connect + a small HTTP GET to an allowed host, from inside a unit vs from
//             the host.
//   policy    p50 of POST /v1/units/{name}/policy/network switching to an enforced policy (stored,
//             nft rules replaced, policy file published); goal <= 50 ms. Baseline: GET of the policy.
//
//   npx tsc -b && npm run build:agent && node bench/network.mjs [--n 300]
import { execHttp } from "../packages/server/dist/testing/exec-client.js";
import { startFakeInternet } from "../packages/server/dist/testing/fake-internet.js";
import { arg, fmt, percentile, startBenchServer, timeIt } from "./lib.mjs";

const N = arg("n", 300);

// Runs inside the unit (node from /.unit/bin): N sequential A queries over UDP, or N HTTP GETs
// on fresh connections; prints the samples in ms as JSON.
const IN_UNIT = `
const dgram = require("dgram"), http = require("http");
const [mode, target, name, n] = process.argv.slice(2);
const query = (id) => {
  const labels = name.split(".").flatMap((l) => [Buffer.from([l.length]), Buffer.from(l)]);
  const head = Buffer.alloc(12); head.writeUInt16BE(id, 0); head.writeUInt16BE(0x0100, 2); head.writeUInt16BE(1, 4);
  return Buffer.concat([head, ...labels, Buffer.from([0, 0, 1, 0, 1])]);
};
async function dns() {
  const s = dgram.createSocket("udp4"); const out = [];
  for (let i = 0; i < Number(n); i++) {
    const t = performance.now();
    await new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error("timeout")), 2000);
      s.once("message", (m) => { clearTimeout(timer); if ((m[3] & 15) !== 0) rej(new Error("rcode " + (m[3] & 15))); else res(); });
      s.send(query(i & 0xffff), 53, target);
    });
    out.push(performance.now() - t);
  }
  s.close(); return out;
}
async function get() {
  const out = [];
  for (let i = 0; i < Number(n); i++) {
    const t = performance.now();
    await new Promise((res, rej) => http.get({ host: target, path: "/", agent: false }, (r) => { r.resume(); r.on("end", res); }).on("error", rej));
    out.push(performance.now() - t);
  }
  return out;
}
(mode === "dns" ? dns() : get()).then((o) => console.log(JSON.stringify(o)), (e) => { console.error(e.message); process.exit(1); });
`;

const fi = await startFakeInternet({ names: ["api.github.com", "www.example.com"], ttlS: 3600 });
let server;
try {
  server = await startBenchServer({ org: "netbench", env: { UMS_DNS_UPSTREAM: fi.dnsUpstream } });
  const { url, token, auth } = server;
  const api = async (method, path, body) => {
    const res = await fetch(url + path, {
      method,
      headers: { ...auth, "content-type": "application/json" },
      ...(body && { body: JSON.stringify(body) }),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  await api("POST", "/v1/units", { name: "net" });
  const exec = async (cmd, stdin) => {
    const r = await execHttp(url, token, "net", cmd, stdin ? { stdin } : {});
    if (r.exitCode !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr}`);
    return r.stdout.toString();
  };
  await exec(["sh", "-c", "cat > /tmp/bench.js"], IN_UNIT);
  const inUnit = async (...args) => JSON.parse(await exec(["/.unit/bin/node", "/tmp/bench.js", ...args]));
  const gateway = (await exec(["sh", "-c", "sed -n 's/^nameserver //p' /etc/resolv.conf"])).trim();

  // Baseline: straight to the fake upstream (policy open, so the unit may reach it).
  await api("POST", "/v1/units/net/policy/network", { rules: [] });
  await inUnit("dns", fi.dnsIp, "www.example.com", "50");
  const direct = await inUnit("dns", fi.dnsIp, "www.example.com", String(N));
  await api("POST", "/v1/units/net/policy/network", {
    rules: [
      { action: "allow", domain: "*.example.com" },
      { action: "allow", domain: "api.github.com" },
    ],
  });
  // A name never looked up before: its answer's address joins the allow set (one nft line). Its
  // baseline: the first query of a fresh process for a name whose address is already allowed.
  const firstCached = (await inUnit("dns", gateway, "www.example.com", "1"))[0];
  const first = (await inUnit("dns", gateway, "api.github.com", "1"))[0];
  await inUnit("dns", gateway, "www.example.com", "50");
  const viaPolicy = await inUnit("dns", gateway, "www.example.com", String(N));
  const dnsOverhead = percentile(viaPolicy, 50) - percentile(direct, 50);

  // HTTP to an allowed host (its address is in the allow set after the lookups above).
  const ip = fi.hosts["www.example.com"];
  const fromUnit = await inUnit("get", ip, "", String(N));
  const fromHost = [];
  const http = await import("node:http");
  for (let i = 0; i < N; i++) {
    fromHost.push(
      await timeIt(
        () =>
          new Promise((res, rej) =>
            http.get({ host: ip, path: "/", agent: false }, (r) => r.resume().on("end", res)).on("error", rej),
          ),
      ),
    );
  }

  // Policy changes: open -> enforced, timed; the way back is not.
  const toEnforced = [];
  const reads = [];
  for (let i = 0; i < Math.min(N, 100); i++) {
    await api("POST", "/v1/units/net/policy/network", { rules: [] });
    toEnforced.push(
      await timeIt(() =>
        api("POST", "/v1/units/net/policy/network", {
          rules: [{ include: "defaults" }, { action: "allow", domain: `*.example.com` }],
        }),
      ),
    );
    reads.push(await timeIt(() => api("GET", "/v1/units/net/policy/network")));
  }

  const p50 = (s) => percentile(s, 50);
  const row = (label, s, base) =>
    console.log(
      `${label.padEnd(44)} p50 ${fmt(p50(s)).padStart(10)}  p99 ${fmt(percentile(s, 99)).padStart(10)}  ratio ${(p50(s) / p50(base)).toFixed(2)}`,
    );
  console.log(`network egress (n=${N}; fake internet ${fi.dnsIp}; unit resolver ${gateway})`);
  row("dns: direct to the fake upstream (baseline)", direct, direct);
  row("dns: through the unit's policy resolver", viaPolicy, direct);
  console.log(
    `dns: first lookup of a new name (joins the allow set; one sample): ${fmt(first)}; of an allowed one: ${fmt(firstCached)}`,
  );
  console.log(`dns overhead p50: ${fmt(dnsOverhead)} — goal <= 1 ms: ${dnsOverhead <= 1 ? "OK" : "MISS"}`);
  row("http: connect + GET from the host (baseline)", fromHost, fromHost);
  row("http: connect + GET from inside the unit", fromUnit, fromHost);
  row("policy: GET (baseline)", reads, reads);
  row("policy: POST switching to enforced", toEnforced, reads);
  console.log(`policy change p50: ${fmt(p50(toEnforced))} — goal <= 50 ms: ${p50(toEnforced) <= 50 ? "OK" : "MISS"}`);
} finally {
  await server?.stop();
  await fi.close();
}
