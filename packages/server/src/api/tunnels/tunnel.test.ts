import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { startWithUnit, type TestServer } from "../../testing/server.js";
import { startTcpServer, stopTcpServer } from "../../testing/tcp-echo.js";
import { openTestTunnel } from "../../testing/tunnel-client.js";
import { upgradeAnswer } from "../../testing/ws-upgrade.js";
import { within } from "../../util/within.js";
import { MAX_TUNNELS_PER_UNIT } from "./count.js";
import { CLOSE_GRACE_MS } from "./relay.js";

const ECHO = 7000;
const SOURCE = 7100;
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** The TCP tunnel (`/proxy`, packages/protocol/src/tunnel.ts) into a real unit running an echo server. */
describe("TCP tunnel", { timeout: 300_000 }, () => {
  let s: TestServer;
  let token: string;
  let ws: string;
  const tunnel = (init: unknown, data: Buffer[] = [], prefix = "units") =>
    openTestTunnel(`${ws}/v1/${prefix}/tun/proxy`, token, init, data);

  before(async () => {
    ({ s, token } = await startWithUnit("tunnels", "tun"));
    ws = s.url.replace("http", "ws");
    await startTcpServer(s.url, token, "tun", "echo", ECHO);
  });
  after(() => s?.close());

  it("carries bytes both ways, passes the client's end of stream on, and closes when the target does", async () => {
    // The first bytes go out with the open message, before the answer: they wait for the connection.
    const t = await tunnel({ host: "localhost", port: ECHO }, [Buffer.from("hello ")]);
    assert.deepEqual(await t.answer, { status: "connected", target: `127.0.0.1:${ECHO}` });
    t.ws.send(Buffer.from("world"), { binary: true });
    await t.waitFor((b) => b.toString() === "hello world");
    // Half-close: the echo server reads its end of stream and still answers, then closes.
    t.ws.send(Buffer.alloc(0), { binary: true });
    await t.waitFor((b) => b.toString().endsWith("eof after 11 bytes\n"));
    assert.equal((await t.closed).code, 1000);
  });

  it("moves 48 MiB each way at once intact (backpressure both ways), under /v1/sprites too", async () => {
    const data = randomBytes(48 << 20);
    const t = await tunnel({ host: "127.0.0.1", port: ECHO }, [], "sprites");
    assert.equal((await t.answer).status, "connected");
    for (let off = 0; off < data.length; off += 256 << 10) {
      t.ws.send(data.subarray(off, off + (256 << 10)), { binary: true });
      // The client's own sends are bounded too (a test must not buffer 48 MiB in one go).
      while (t.ws.bufferedAmount > 4 << 20) await new Promise((r) => setTimeout(r, 5));
    }
    t.ws.send(Buffer.alloc(0), { binary: true });
    const tail = Buffer.from(`eof after ${data.length} bytes\n`);
    await t.waitBytes(data.length + tail.length, 120_000);
    const got = t.received();
    assert.equal(got.length, data.length + tail.length);
    assert.equal(sha(got.subarray(0, data.length)), sha(data));
    assert.deepEqual(got.subarray(data.length), tail);
    // At once, not after ws's 30 s close timeout (a websocket left paused could not read the close).
    const closed = await within(t.closed, 10_000, { code: "late" });
    assert.deepEqual(closed, { code: 1000, reason: "the target closed the connection" });
  });

  it("closes the tunnel when the port's process goes away", async () => {
    const pid = await startTcpServer(s.url, token, "tun", "echo", ECHO + 1);
    const t = await tunnel({ port: ECHO + 1 });
    assert.equal((await t.answer).status, "connected");
    t.ws.send(Buffer.from("ping"), { binary: true });
    await t.waitFor((b) => b.toString() === "ping");
    await stopTcpServer(s.url, token, "tun", pid);
    const { code } = await t.closed;
    assert.ok(code === 1000 || code === 1011, `close code ${code}`);
  });

  it("answers a port where nothing listens with UMS_TUNNEL_REFUSED", async () => {
    const t = await tunnel({ host: "localhost", port: 1 });
    const answer = await t.answer;
    assert.equal(answer.status, "error");
    assert.equal(answer.code, ErrorCode.TunnelRefused);
    assert.match(String(answer.error), /localhost:1.*refused/);
    assert.equal((await t.closed).code, 1011);
  });

  it("refuses a bad {host, port} with a 400-style answer naming the field, and nothing is dialed", async () => {
    const cases: [unknown, RegExp][] = [
      [{ host: "bad host!", port: 80 }, /^host: /],
      [{ host: "-x.example", port: 80 }, /^host: /],
      [{ host: "300.1.1.1", port: 80 }, /^host: /],
      [{ host: 42, port: 80 }, /^host: /],
      [{ host: "localhost", port: 0 }, /^port: /],
      [{ host: "localhost", port: 65536 }, /^port: /],
      [{ host: "localhost", port: "80" }, /^port: /],
      [{ host: "localhost" }, /^port: is required/],
      ["not json", /JSON/],
      [[1, 2], /JSON object/],
    ];
    for (const [init, re] of cases) {
      const t = await tunnel(init);
      const answer = await t.answer;
      assert.equal(answer.status, "error", JSON.stringify(init));
      assert.equal(answer.code, ErrorCode.Validation, JSON.stringify(init));
      assert.ok(
        (answer.errors as string[]).some((e) => re.test(e)),
        `${JSON.stringify(init)}: ${JSON.stringify(answer)}`,
      );
      assert.equal((await t.closed).code, 1008);
    }
  });

  it("takes the target in the upgrade's query: the answer comes first, bytes sent before it wait", async () => {
    for (const prefix of ["units", "sprites"]) {
      const url = `${ws}/v1/${prefix}/tun/proxy?host=localhost&port=${ECHO}`;
      const t = await openTestTunnel(url, token, undefined, [Buffer.from("early ")]);
      assert.deepEqual(await t.answer, { status: "connected", target: `127.0.0.1:${ECHO}` });
      // A text message is not part of the tunnel (a {host, port} sent anyway is ignored).
      t.ws.send(JSON.stringify({ host: "localhost", port: 1 }));
      t.ws.send(Buffer.from("bird"), { binary: true });
      await t.waitFor((b) => b.toString() === "early bird");
      t.ws.send(Buffer.alloc(0), { binary: true });
      await t.waitFor((b) => b.toString().endsWith("eof after 10 bytes\n"));
      assert.equal((await t.closed).code, 1000);
    }
    const refused = await openTestTunnel(`${ws}/v1/units/tun/proxy?port=1`, token, undefined);
    const answer = await refused.answer;
    assert.equal(answer.code, ErrorCode.TunnelRefused, JSON.stringify(answer));
    assert.equal((await refused.closed).code, 1011);
  });

  it("refuses a bad target in the query with a 400 naming the field, before the upgrade", async () => {
    const cases: [string, RegExp][] = [
      ["port=0", /port/],
      ["port=65536", /port/],
      ["port=http", /port/],
      ["host=bad%20host!&port=80", /^host: /],
      ["host=300.1.1.1&port=80", /^host: /],
      ["host=localhost", /^port: is required with host/],
    ];
    for (const [q, re] of cases) {
      const r = await upgradeAnswer(`${ws}/v1/units/tun/proxy?${q}`, token);
      assert.equal(r.status, 400, `${q}: ${r.body}`);
      const body = JSON.parse(r.body) as { code: string; errors?: string[]; error?: string };
      assert.equal(body.code, ErrorCode.Validation, q);
      assert.ok(
        (body.errors ?? [body.error ?? ""]).some((e) => re.test(e)),
        `${q}: ${r.body}`,
      );
    }
  });

  it("is a websocket only, and another organization's unit is not found", async () => {
    const plain = await s.api("GET", "/v1/units/tun/proxy", { token });
    assert.equal(plain.status, 400);
    assert.match(plain.text, /websocket/);
    const other = await s.token("tunnels-other");
    for (const prefix of ["units", "sprites"]) {
      const r = await upgradeAnswer(`${ws}/v1/${prefix}/tun/proxy`, other);
      assert.equal(r.status, 404, r.body);
      assert.equal(JSON.parse(r.body).code, ErrorCode.UnitNotFound);
    }
    assert.equal((await s.api("GET", "/v1/units/tun/proxy", { token: other })).status, 404);
    assert.equal((await upgradeAnswer(`${ws}/v1/units/tun/proxy`, "not-a-token")).status, 401);
  });

  it(`holds at most ${MAX_TUNNELS_PER_UNIT} tunnels of a unit open, counting those still opening`, async () => {
    const held = await Promise.all(
      Array.from({ length: MAX_TUNNELS_PER_UNIT }, () =>
        // No open message: each waits for one, and counts.
        openTestTunnel(`${ws}/v1/units/tun/proxy`, token, undefined),
      ),
    );
    try {
      const over = await upgradeAnswer(`${ws}/v1/units/tun/proxy`, token);
      assert.equal(over.status, 429, over.body);
      assert.equal(JSON.parse(over.body).code, ErrorCode.TunnelLimit);
    } finally {
      for (const t of held) t.ws.terminate();
    }
    // Their count is given back as they go.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const again = await upgradeAnswer(`${ws}/v1/units/tun/proxy`, token);
      if (again.status === 101) break;
      assert.ok(Date.now() < deadline, `still ${again.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it("cuts tunnels whose client left while their target keeps sending, well before the close grace", async () => {
    await startTcpServer(s.url, token, "tun", "source", SOURCE);
    const left = await Promise.all(
      Array.from({ length: MAX_TUNNELS_PER_UNIT }, () =>
        openTestTunnel(`${ws}/v1/units/tun/proxy?port=${SOURCE}`, token, undefined),
      ),
    );
    for (const t of left) {
      assert.equal((await t.answer).status, "connected");
      await t.waitBytes(1);
    }
    // The server's grace timer of a tunnel starts once it sees that tunnel's client gone, so not
    // before the first terminate: a place freed before firstGone + CLOSE_GRACE_MS was freed by the
    // AFTER_CLOSE_BYTES rule, not by the timer. (A fraction of the grace, timed from the last
    // terminate, was too tight for 64 MiB through the agents of a loaded CI host.)
    const firstGone = Date.now();
    for (const t of left) t.ws.terminate();
    // Drained for CLOSE_GRACE_MS, they would hold the unit's every tunnel until then. New tunnels
    // are kept as they are let in (ending them would free places of their own, and a CI run under
    // load once counted those as the old ones still held): all of the unit's places, before then.
    const deadline = firstGone + CLOSE_GRACE_MS - 500;
    const held: Awaited<ReturnType<typeof openTestTunnel>>[] = [];
    try {
      for (;;) {
        const again = await Promise.allSettled(
          Array.from({ length: MAX_TUNNELS_PER_UNIT - held.length }, () =>
            openTestTunnel(`${ws}/v1/units/tun/proxy`, token, undefined),
          ),
        );
        for (const r of again) if (r.status === "fulfilled") held.push(r.value);
        // Every tunnel of this round was let in by now: before the timer could have freed a place.
        const at = Date.now();
        if (held.length === MAX_TUNNELS_PER_UNIT) {
          assert.ok(at < firstGone + CLOSE_GRACE_MS, "the places were freed only as late as the close grace");
          break;
        }
        const refused = MAX_TUNNELS_PER_UNIT - held.length;
        assert.ok(at < deadline, `${refused} of ${MAX_TUNNELS_PER_UNIT} still refused`);
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      for (const t of held) t.ws.terminate();
    }
  });
});
