// Issue #20 part 3, fuzz beyond bodies: what attackers and broken clients send over the wire (bodies
// announced and never sent, slow headers, huge headers, many connections at once, websockets with
// bad frames or whose client never reads), against a real server with a real unit. Never a 5xx,
// never a hang, and the server's memory stays bounded.
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { startWithUnit, type TestServer } from "../testing/server.js";

/** Opens a raw TCP connection to the server, writes `head`, and collects what comes back until it closes. */
function raw(url: string, head: string): { socket: Socket; closed: Promise<{ text: string; ms: number }> } {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const t0 = Date.now();
  let text = "";
  socket.on("data", (d) => {
    text += d.toString("latin1");
  });
  socket.on("error", () => {});
  const closed = new Promise<{ text: string; ms: number }>((resolve) =>
    socket.on("close", () => resolve({ text, ms: Date.now() - t0 })),
  );
  socket.write(head);
  return { socket, closed };
}

const rssMiB = () => process.memoryUsage().rss / 2 ** 20;

describe("slow and broken clients", { timeout: 240_000 }, () => {
  let s: TestServer;
  let token: string;
  let host: string;
  before(async () => {
    ({ s, token } = await startWithUnit("acme", "target", { headersTimeout: "2s", bodyIdleTimeout: "2s" }));
    host = new URL(s.url).host;
  });
  after(() => s?.close());

  it("a body announced and never sent is answered 408 UMS_REQUEST_TIMEOUT and the connection closed", async () => {
    const { closed } = raw(
      s.url,
      `POST /v1/units HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":`,
    );
    const { text, ms } = await closed;
    assert.match(text, /^HTTP\/1\.1 408 /);
    assert.match(text, /"code":"UMS_REQUEST_TIMEOUT"/);
    assert.ok(ms >= 1_900 && ms < 15_000, `closed after ${ms} ms`);
    // Nothing half-applied: no unit was made.
    const list = await s.api("GET", "/v1/units", { token });
    assert.deepEqual(
      list.body.sprites.map((u: { name: string }) => u.name),
      ["target"],
    );
  });

  it("a body that keeps coming, slowly, is not cut: exec's stdin for longer than the stall limit", async () => {
    const { socket, closed } = raw(
      s.url,
      `POST /v1/units/target/exec?cmd=cat&stdin=true HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
    );
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 600));
      socket.write("1\r\nx\r\n");
    }
    socket.write("0\r\n\r\n");
    const { text, ms } = await closed;
    assert.match(text, /^HTTP\/1\.1 200 /);
    assert.ok(ms > 4_000, `${ms} ms`);
    assert.equal((text.match(/x/g) ?? []).length >= 8, true, text.slice(-200));
  });

  it("slow headers are cut after the headers timeout; huge headers get 431", async () => {
    const slow = raw(s.url, `GET /v1/units HTTP/1.1\r\nHost: ${host}\r\n`);
    const drip = setInterval(() => slow.socket.write("X-Drip: 1\r\n"), 300);
    const { text, ms } = await slow.closed;
    clearInterval(drip);
    assert.ok(ms < 10_000, `closed after ${ms} ms`);
    assert.doesNotMatch(text, /^HTTP\/1\.1 [25]/);

    const big = raw(s.url, `GET /v1/units HTTP/1.1\r\nHost: ${host}\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
    assert.match((await big.closed).text, /^HTTP\/1\.1 431 /);
  });

  it("many connections at once are all answered", async () => {
    const answers = await Promise.all(
      Array.from({ length: 300 }, () => fetch(`${s.url}/v1/units`, { headers: { authorization: `Bearer ${token}` } })),
    );
    const statuses = new Set(answers.map((r) => r.status));
    await Promise.all(answers.map((r) => r.arrayBuffer()));
    assert.deepEqual(
      [...statuses].filter((x) => x >= 500),
      [],
    );
    assert.ok(statuses.has(200));
  });

  it("a websocket with bad frames is closed; the server answers on", async () => {
    const ws = new WebSocket(`${s.url.replace(/^http/, "ws")}/v1/units/target/exec?cmd=cat`, {
      headers: { authorization: `Bearer ${token}` },
    });
    await new Promise((r, j) => {
      ws.once("open", r);
      ws.once("error", j);
    });
    const closed = new Promise<number>((r) => ws.once("close", (code) => r(code)));
    ws.on("error", () => {});
    // An unmasked frame with reserved bits and opcode 0xF: not a frame a client may send (RFC 6455 §5).
    (ws as unknown as { _socket: Socket })._socket.write(Buffer.from([0xff, 0x05, 1, 2, 3, 4, 5]));
    const code = await closed;
    assert.ok(code === 1002 || code === 1006, `close code ${code}`);
    assert.equal((await s.api("GET", "/v1/units/target", { token })).status, 200);
  });

  it("a websocket client that never reads holds the unit's output back, not the server's memory", async () => {
    const before = rssMiB();
    const ws = new WebSocket(
      `${s.url.replace(/^http/, "ws")}/v1/units/target/exec?cmd=sh&cmd=-c&cmd=${encodeURIComponent("head -c 400000000 /dev/zero")}`,
      { headers: { authorization: `Bearer ${token}` } },
    );
    ws.on("error", () => {});
    await new Promise((r, j) => {
      ws.once("open", r);
      ws.once("error", j);
    });
    // Never read: the client's socket is paused from the start.
    ws.pause();
    let peak = before;
    for (let i = 0; i < 16; i++) {
      await new Promise((r) => setTimeout(r, 500));
      peak = Math.max(peak, rssMiB());
    }
    assert.ok(peak - before < 150, `the server grew by ${Math.round(peak - before)} MiB for a client that never reads`);
    ws.terminate();
    assert.equal((await s.api("GET", "/v1/units/target", { token })).status, 200);
  });
});
