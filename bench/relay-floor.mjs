#!/usr/bin/env node
// What relaying costs on this machine, without ums (issue 12's tunnel goal, see bench/tunnel.mjs):
// a download of --mib MiB of zeros over loopback TCP, read by this process, from
//   direct     the source itself
//   1 relay    a node process between (net sockets joined by pipe(), no JS work per chunk beyond it)
//   2 relays   two such processes in a row (the tunnel's agent and server hops, without websocket)
//   2 + ws     the second relay sends each read as a websocket binary message (ws, like ums serve)
//              and this process reads them with ws, like the tunnel bench's client
// Each figure is the median of --runs runs. Only loopback addresses are used.
//
//   node bench/relay-floor.mjs [--mib 512] [--runs 3]
import { fork } from "node:child_process";
import { connect, createServer } from "node:net";
import WebSocket, { WebSocketServer } from "ws";
import { arg, percentile } from "./lib.mjs";

if (process.argv[2] === "--child") {
  // A relay: listens on an ephemeral loopback port, joins each connection to 127.0.0.1:<target>.
  const [, , , mode, target] = process.argv;
  if (mode === "source") {
    const zeros = Buffer.alloc(1 << 20);
    const srv = createServer((c) => {
      c.on("error", () => {});
      const more = () => {
        while (!c.destroyed && c.write(zeros));
      };
      c.on("drain", more);
      more();
    });
    srv.listen(0, "127.0.0.1", () => process.send(srv.address().port));
  } else if (mode === "pipe") {
    const srv = createServer((c) => {
      const t = connect({ host: "127.0.0.1", port: Number(target), noDelay: true });
      const cut = () => {
        c.destroy();
        t.destroy();
      };
      c.on("error", cut);
      t.on("error", cut);
      c.on("close", () => t.destroy());
      t.on("close", () => c.destroy());
      c.pipe(t);
      t.pipe(c);
    });
    srv.listen(0, "127.0.0.1", () => process.send(srv.address().port));
  } else if (mode === "ws") {
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false }, () =>
      process.send(wss.address().port),
    );
    wss.on("connection", (ws) => {
      const t = connect({ host: "127.0.0.1", port: Number(target), noDelay: true });
      t.on("error", () => ws.terminate());
      ws.on("close", () => t.destroy());
      let paused = false;
      t.on("data", (chunk) => {
        ws.send(chunk, { binary: true }, () => {
          if (paused && ws.bufferedAmount < 1 << 19) {
            paused = false;
            t.resume();
          }
        });
        if (!paused && ws.bufferedAmount >= 1 << 20) {
          paused = true;
          t.pause();
        }
      });
    });
  }
} else {
  const MIB = arg("mib", 512);
  const RUNS = arg("runs", 3);
  const BYTES = MIB * (1 << 20);
  const children = [];
  const start = (mode, target = 0) =>
    new Promise((resolve, reject) => {
      const c = fork(new URL(import.meta.url).pathname, ["--child", mode, String(target)]);
      children.push(c);
      c.once("message", resolve);
      c.once("error", reject);
    });
  const tcp = (port) =>
    new Promise((resolve) => {
      const s = connect({ host: "127.0.0.1", port, noDelay: true });
      const t = performance.now();
      let got = 0;
      s.on("data", (d) => {
        got += d.length;
        if (got >= BYTES) {
          s.destroy();
          resolve((got / (1 << 20) / (performance.now() - t)) * 1000);
        }
      });
    });
  const ws = (port) =>
    new Promise((resolve) => {
      const w = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false });
      let t = 0;
      let got = 0;
      w.on("open", () => {
        t = performance.now();
      });
      w.on("message", (d) => {
        got += d.length;
        if (got >= BYTES) {
          w.terminate();
          resolve((got / (1 << 20) / (performance.now() - t)) * 1000);
        }
      });
    });
  const runs = async (fn) => {
    await fn();
    const xs = [];
    for (let i = 0; i < RUNS; i++) xs.push(await fn());
    return percentile(xs, 50);
  };
  try {
    const source = await start("source");
    const one = await start("pipe", source);
    const two = await start("pipe", one);
    const twoWs = await start("ws", one);
    const direct = await runs(() => tcp(source));
    const rows = [
      ["direct", direct],
      ["1 relay", await runs(() => tcp(one))],
      ["2 relays", await runs(() => tcp(two))],
      ["2 relays + ws", await runs(() => ws(twoWs))],
    ];
    console.log(`\nrelay floor (${MIB} MiB of zeros over loopback, median of ${RUNS})`);
    for (const [label, v] of rows) {
      console.log(`- ${label}: ${v.toFixed(0)} MiB/s (${((v / direct) * 100).toFixed(0)}% of direct)`);
    }
  } finally {
    for (const c of children) c.kill();
  }
}
