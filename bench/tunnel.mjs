#!/usr/bin/env node
// TCP tunnel benchmark (issue 12): throughput and connect latency of the `/proxy` websocket tunnel
// (packages/protocol/src/tunnel.ts) against the physical baseline measured in the same run, a
// direct TCP connection from the host to the unit's address (its veth), to python servers listening
// on 0.0.0.0 in the unit (testing/tcp-echo.ts):
//   download   the unit sends zeros (source), the host reads --mib MiB
//   upload     the host sends --mib MiB and its end of stream, the unit counts them (sink) and answers
//   connect    time until the connection can carry bytes: direct, the TCP handshake; tunnel, the
//              websocket upgrade, the {host, port} message and the "connected" answer (--connects, one
//              after another, to the echo server), with the upgrade's share; again with the target in
//              the upgrade's query (the agent connects while the upgrade completes); reference: an
//              authenticated GET of the unit
// --only download,upload,connect runs some of them. bench/relay-floor.mjs shows what relaying costs
// on the machine without ums (bare node relays between loopback sockets).
// Each throughput figure is the median of --runs runs. Goals: tunnel >= 70% of direct throughput,
// connect p50 <= direct p50 + 2 ms. The client is node's `ws` (it masks what it sends in JavaScript).
//
//   npx tsc -b && npm run build:agent && node bench/tunnel.mjs [--mib 256] [--runs 3] [--connects 200]
import { connect } from "node:net";
import WebSocket from "ws";
import { arg, percentile, startBenchServer } from "./lib.mjs";

const MIB = arg("mib", 256);
const RUNS = arg("runs", 3);
const CONNECTS = arg("connects", 200);
const BYTES = MIB << 20;
const PORTS = { source: 7001, sink: 7002, echo: 7003 };
const CHUNK = Buffer.alloc(256 << 10);
/** --only download,upload,connect: the parts to run (all by default). */
const ONLY = (() => {
  const i = process.argv.indexOf("--only");
  return i > 0 ? new Set(process.argv[i + 1].split(",")) : new Set(["download", "upload", "connect"]);
})();

const median = (xs) => percentile(xs, 50);

function directSocket(ip, port) {
  return new Promise((resolve, reject) => {
    const s = connect({ host: ip, port, noDelay: true }, () => resolve(s));
    s.once("error", reject);
  });
}

/** When each tunnel's websocket opened, ms after its start (the upgrade's share of a connect). */
const upgrades = [];

/**
 * A tunnel to `port`, resolved at its "connected" answer. `query`: the target in the upgrade's query
 * (the agent connects while the upgrade completes), else in the first message as the public clients send it.
 */
function tunnelSocket(base, token, port, query = false) {
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const q = query ? `?host=localhost&port=${port}` : "";
    const ws = new WebSocket(`${base.replace("http", "ws")}/v1/units/tun/proxy${q}`, {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
    });
    ws.binaryType = "nodebuffer";
    ws.once("error", reject);
    ws.once("unexpected-response", (_q, res) => reject(new Error(`upgrade: ${res.statusCode}`)));
    ws.once("open", () => {
      upgrades.push(performance.now() - t);
      if (!query) ws.send(JSON.stringify({ host: "localhost", port }));
    });
    ws.once("message", (d, isBinary) => {
      const a = isBinary ? {} : JSON.parse(String(d));
      if (a.status === "connected") resolve(ws);
      else reject(new Error(`tunnel: ${String(d)}`));
    });
  });
}

async function downloadDirect(ip) {
  const s = await directSocket(ip, PORTS.source);
  const t = performance.now();
  let got = 0;
  await new Promise((resolve) => {
    s.on("data", (d) => {
      got += d.length;
      if (got >= BYTES) resolve();
    });
  });
  const ms = performance.now() - t;
  s.destroy();
  return (got / (1 << 20) / ms) * 1000;
}

async function downloadTunnel(base, token) {
  const ws = await tunnelSocket(base, token, PORTS.source);
  const t = performance.now();
  let got = 0;
  await new Promise((resolve) => {
    ws.on("message", (d) => {
      got += d.length;
      if (got >= BYTES) resolve();
    });
  });
  const ms = performance.now() - t;
  ws.terminate();
  return (got / (1 << 20) / ms) * 1000;
}

async function uploadDirect(ip) {
  const s = await directSocket(ip, PORTS.sink);
  const t = performance.now();
  const answer = new Promise((resolve) => s.on("data", (d) => resolve(String(d).trim())));
  for (let sent = 0; sent < BYTES; sent += CHUNK.length) {
    if (!s.write(CHUNK)) await new Promise((r) => s.once("drain", r));
  }
  s.end();
  const n = Number(await answer);
  const ms = performance.now() - t;
  if (n !== BYTES) throw new Error(`direct upload: the unit counted ${n} bytes`);
  s.destroy();
  return (n / (1 << 20) / ms) * 1000;
}

async function uploadTunnel(base, token) {
  const ws = await tunnelSocket(base, token, PORTS.sink);
  const t = performance.now();
  const answer = new Promise((resolve) => ws.on("message", (d) => resolve(String(d).trim())));
  for (let sent = 0; sent < BYTES; sent += CHUNK.length) {
    ws.send(CHUNK, { binary: true });
    while (ws.bufferedAmount > 4 << 20) await new Promise((r) => setImmediate(r));
  }
  ws.send(Buffer.alloc(0), { binary: true });
  const n = Number(await answer);
  const ms = performance.now() - t;
  if (n !== BYTES) throw new Error(`tunnel upload: the unit counted ${n} bytes`);
  ws.terminate();
  return (n / (1 << 20) / ms) * 1000;
}

async function connects(open) {
  const samples = [];
  for (let i = 0; i < CONNECTS + 10; i++) {
    const t = performance.now();
    const c = await open().catch((err) => Promise.reject(new Error(`connect ${i}: ${err.message}`)));
    if (i >= 10) samples.push(performance.now() - t);
    if (c instanceof WebSocket) {
      // End of stream, then the close that follows the echo server's own end (the tunnel's count
      // is given back then: 200 tunnels closed faster than their targets end would reach the cap).
      const closed = new Promise((r) => c.once("close", r));
      c.send(Buffer.alloc(0), { binary: true });
      await closed;
    } else c.destroy();
  }
  return samples;
}

const bench = await startBenchServer({
  env: {
    UMS_IDLE_WARM: "1h",
    UMS_IDLE_COLD: "1h",
    ...(process.env.BENCH_SERVER_NODE_OPTIONS && { NODE_OPTIONS: process.env.BENCH_SERVER_NODE_OPTIONS }),
  },
});
const { url, token, auth } = bench;
const out = {};
try {
  const { startTcpServer } = await import("../packages/server/dist/testing/tcp-echo.js");
  const { execHttp } = await import("../packages/server/dist/testing/exec-client.js");
  const created = await fetch(`${url}/v1/units`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name: "tun" }),
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
  for (const [mode, port] of Object.entries(PORTS)) await startTcpServer(url, token, "tun", mode, port);
  const ipOut = await execHttp(url, token, "tun", [
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
  process.stderr.write(`unit address ${ip}; ${MIB} MiB per transfer, ${RUNS} runs, ${CONNECTS} connects\n`);

  const runs = async (fn) => {
    await fn(); // warm-up
    const xs = [];
    for (let i = 0; i < RUNS; i++) xs.push(await fn());
    return median(xs);
  };
  if (ONLY.has("download")) {
    out.downDirect = await runs(() => downloadDirect(ip));
    out.downTunnel = await runs(() => downloadTunnel(url, token));
  }
  if (ONLY.has("upload")) {
    out.upDirect = await runs(() => uploadDirect(ip));
    out.upTunnel = await runs(() => uploadTunnel(url, token));
  }
  if (ONLY.has("connect")) {
    out.connDirect = await connects(() => directSocket(ip, PORTS.echo));
    upgrades.length = 0;
    out.connTunnel = await connects(() => tunnelSocket(url, token, PORTS.echo));
    out.upgrade = upgrades.slice(10);
    out.connQuery = await connects(() => tunnelSocket(url, token, PORTS.echo, true));
    out.apiGet = await connects(async () => {
      const r = await fetch(`${url}/v1/units/tun`, { headers: auth });
      if (r.status !== 200) throw new Error(`GET /v1/units/tun: ${r.status}`);
      await r.arrayBuffer();
      return { destroy() {} };
    });
  }
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  await bench.stop().catch((err) => console.error(err));
}

{
  const line = (label, direct, tunnel) => {
    const ratio = tunnel / direct;
    console.log(
      `- ${label}: direct ${direct.toFixed(0)} MiB/s, tunnel ${tunnel.toFixed(0)} MiB/s (${(ratio * 100).toFixed(0)}% of direct)  [goal >= 70%: ${ratio >= 0.7 ? "PASS" : "MISS"}]`,
    );
  };
  console.log(`\nums TCP tunnel benchmark (${MIB} MiB per transfer, median of ${RUNS})`);
  if (out.downTunnel) line("download (unit → host)", out.downDirect, out.downTunnel);
  if (out.upTunnel) line("upload (host → unit)", out.upDirect, out.upTunnel);
}
if (out.apiGet) {
  const d50 = percentile(out.connDirect, 50);
  const t50 = percentile(out.connTunnel, 50);
  console.log(
    `- connect: direct p50 ${d50.toFixed(2)} ms p99 ${percentile(out.connDirect, 99).toFixed(2)} ms, ` +
      `tunnel p50 ${t50.toFixed(2)} ms p99 ${percentile(out.connTunnel, 99).toFixed(2)} ms ` +
      `(+${(t50 - d50).toFixed(2)} ms, ${(t50 / d50).toFixed(1)}x)  [goal p50 <= direct + 2 ms: ${t50 - d50 <= 2 ? "PASS" : "MISS"}]`,
  );
  console.log(`  of which the websocket upgrade p50 ${percentile(out.upgrade, 50).toFixed(2)} ms`);
  const q50 = percentile(out.connQuery, 50);
  console.log(
    `- connect, target in the upgrade's query: tunnel p50 ${q50.toFixed(2)} ms p99 ${percentile(out.connQuery, 99).toFixed(2)} ms ` +
      `(+${(q50 - d50).toFixed(2)} ms)  [goal p50 <= direct + 2 ms: ${q50 - d50 <= 2 ? "PASS" : "MISS"}]`,
  );
  console.log(
    `- reference: GET /v1/units/{name} p50 ${percentile(out.apiGet, 50).toFixed(2)} ms (an authenticated request's floor)`,
  );
}
