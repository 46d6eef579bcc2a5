import assert from "node:assert/strict";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import WebSocket, { WebSocketServer } from "ws";
import { HARD_LIMIT, HIGH_WATER, websocketTransport } from "./transport.js";

/** A loopback websocket pair: the server end (the transport's) and a client. */
async function pair(clientOpts: WebSocket.ClientOptions = {}) {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await once(wss, "listening");
  const accepted = once(wss, "connection");
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, clientOpts);
  client.on("error", () => {});
  const [server] = (await accepted) as [WebSocket];
  await once(client, "open");
  const done = () => {
    client.terminate();
    wss.close();
  };
  return { wss, server, client, done };
}

describe("control transport", () => {
  it("pings, and closes a connection whose client answers no ping", async () => {
    const p = await pair({ autoPong: false });
    websocketTransport(p.server, { intervalMs: 30, deadMs: 150 });
    const pings = { n: 0 };
    p.client.on("ping", () => pings.n++);
    const started = Date.now();
    await once(p.server, "close");
    assert.ok(pings.n >= 2, `${pings.n} pings`);
    assert.ok(Date.now() - started >= 150);
    p.done();
  });

  it("keeps a client that answers pings", async () => {
    const p = await pair();
    websocketTransport(p.server, { intervalMs: 30, deadMs: 150 });
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(p.server.readyState, p.server.OPEN);
    p.done();
  });

  it("says when the client is behind, waits for it, and cuts off one that never reads", async () => {
    const p = await pair();
    const t = websocketTransport(p.server);
    p.client.pause();
    const chunk = Buffer.alloc(1024 * 1024);
    while (!t.backlogged()) t.send(chunk);
    assert.ok(p.server.bufferedAmount > HIGH_WATER);
    let drained = false;
    const waiting = t.drained().then(() => {
      drained = true;
    });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(drained, false, "no drain while the client reads nothing");
    p.client.resume();
    await waiting;
    assert.equal(t.backlogged(), false);
    // A client that never reads: past the hard limit the connection is closed, not grown.
    p.client.pause();
    const closed = once(p.server, "close");
    for (let i = 0; i < HARD_LIMIT / chunk.length + 64 && p.server.readyState === p.server.OPEN; i++) t.send(chunk);
    await closed;
    p.done();
  });
});
