import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { hashToken } from "../../auth/tokens.js";
import { ControlClient } from "../../testing/control-client.js";
import { startWithUnit, type TestServer } from "../../testing/server.js";
import { startTcpServer } from "../../testing/tcp-echo.js";
import { openTestTunnel, type TestTunnel } from "../../testing/tunnel-client.js";
import { upgradeAnswer } from "../../testing/ws-upgrade.js";
import { MAX_TUNNELS_PER_UNIT } from "../tunnels/count.js";

// The control websocket's `proxy` op (control/proxy-op.ts) against a real unit running TCP servers:
// the Go client's port forwarding (its legacy start, plain framing) and the prefixed op.start.

const UNIT = "cpx";
const ECHO = 7300;
const SOURCE = 7301;

describe("control websocket: proxy op", { timeout: 300_000 }, () => {
  let s: TestServer;
  let token: string;
  let ws: string;
  const open = (prefix = "sprites", t = token) => ControlClient.open(`${ws}/v1/${prefix}/${UNIT}/control`, t);

  before(async () => {
    ({ s, token } = await startWithUnit("cproxy", UNIT));
    ws = s.url.replace("http", "ws");
    await startTcpServer(s.url, token, UNIT, "echo", ECHO);
    await startTcpServer(s.url, token, UNIT, "source", SOURCE);
  });
  after(() => s?.close());

  /** An exec op on `c` whose frames are all its own: nothing of an earlier op comes after its start. */
  async function cleanExec(c: ControlClient): Promise<void> {
    c.start("exec", { cmd: ["sh", "-c", "echo idle"] });
    const r = await c.execOutcome();
    assert.equal(r.frames[0]?.binary, false, "the exec's first frame is its session_info");
    assert.equal(r.messages[0]?.type, "session_info");
    for (const f of r.frames.filter((x) => x.binary)) assert.ok([1, 2, 3].includes(f.data[0] as number));
    assert.equal(r.stdout, "idle\n");
    assert.deepEqual(r.end, { type: "op.complete", args: { exitCode: 0 } });
  }

  it("carries bytes both ways for the Go client's start; after release the connection is idle and clean", async () => {
    const c = await open();
    // Bytes sent right after the start wait for the connection.
    c.startGoProxy({ host: "localhost", port: ECHO });
    c.send(Buffer.from("hello "));
    assert.deepEqual(await c.nextJson(), { status: "connected", target: `127.0.0.1:${ECHO}` });
    c.send(Buffer.from("world"));
    assert.equal((await c.binaryUntil((b) => b.length >= 11)).toString(), "hello world");
    // Text frames are not the connection's (and are no envelope): ignored.
    c.send("not part of the stream");
    c.send(Buffer.from("!"));
    assert.equal((await c.binaryUntil((b) => b.length >= 1)).toString(), "!");
    c.release();
    await cleanExec(c);
    // A target that never stops sending: release stops it, and nothing of it follows.
    c.startGoProxy({ host: "127.0.0.1", port: SOURCE });
    assert.equal((await c.nextJson()).status, "connected");
    await c.binaryUntil((b) => b.length >= 4 << 20);
    c.release();
    // What was in flight before the release may still come; then only the exec's own frames.
    c.start("exec", { cmd: ["sh", "-c", "echo idle"] });
    for (;;) {
      const f = await c.next();
      if (!f.binary) {
        assert.equal(JSON.parse(f.text).type, "session_info");
        break;
      }
    }
    for (;;) {
      const f = await c.next();
      if (ControlClient.envelope(f)) break;
      if (f.binary) assert.ok([1, 3].includes(f.data[0] as number), "no byte of the released proxy after it");
    }
    await cleanExec(c);
    await c.close();
  });

  it("passes the client's end of stream on; the target's end closes the Go client's connection 1000", async () => {
    const c = await open();
    c.startGoProxy({ port: ECHO });
    assert.equal((await c.nextJson()).status, "connected");
    c.send(Buffer.from("abc"));
    c.send(Buffer.alloc(0));
    const got = await c.binaryUntil((b) => b.toString().endsWith("eof after 3 bytes\n"));
    assert.equal(got.toString(), "abceof after 3 bytes\n");
    assert.equal((await c.closed).code, 1000, "the only end of stream the Go client reads");
  });

  it("ends with op.complete in the prefixed framing, and runs again on the same connection", async () => {
    const c = await open("units");
    for (let i = 0; i < 2; i++) {
      c.start("proxy", { host: "localhost", port: String(ECHO) });
      assert.equal((await c.nextJson()).status, "connected");
      c.send(Buffer.from(`run-${i}`));
      c.send(Buffer.alloc(0));
      const got = await c.binaryUntil((b) => b.toString().endsWith("bytes\n"));
      assert.equal(got.toString(), `run-${i}eof after 5 bytes\n`);
      const end = await c.nextEnvelope();
      assert.deepEqual({ type: end.type, prefixed: end.prefixed }, { type: "op.complete", prefixed: true });
    }
    await cleanExec(c);
    await c.close();
  });

  it("answers a refused port with one error answer and nothing after it; the connection stays usable", async () => {
    const c = await open();
    c.startGoProxy({ host: "localhost", port: 1 });
    const answer = await c.nextJson();
    assert.equal(answer.status, "error");
    assert.equal(answer.code, ErrorCode.TunnelRefused);
    assert.match(answer.error, /localhost:1.*refused/);
    c.release();
    await cleanExec(c);
    await c.close();
  });

  it("refuses a bad host or port with a Validation answer naming the field, and nothing is dialed", async () => {
    const c = await open();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ host: "bad host!", port: 80 }, /^host: /],
      [{ host: "300.1.1.1", port: 80 }, /^host: /],
      [{ host: "-x.example", port: 80 }, /^host: /],
      [{ host: "localhost", port: 0 }, /^port: must be/],
      [{ host: "localhost", port: 65536 }, /^port: must be/],
      [{ host: "localhost", port: "80x" }, /^port: must be/],
      [{ host: "localhost", port: -1 }, /^port: must be/],
      [{ host: "localhost" }, /^port: is required/],
    ];
    for (const [params, re] of cases) {
      c.startGoProxy(params);
      const answer = await c.nextJson();
      assert.equal(answer.status, "error", JSON.stringify(params));
      assert.equal(answer.code, ErrorCode.Validation);
      assert.ok(
        (answer.errors as string[]).some((e) => re.test(e)),
        `${JSON.stringify(params)}: ${JSON.stringify(answer)}`,
      );
      c.release();
    }
    // A params value that is no string, number or list is the envelope's problem (op.error).
    c.send(JSON.stringify({ type: "start", operation: "proxy", params: { host: { a: 1 }, port: 80 } }));
    const broken = await c.nextEnvelope();
    assert.equal(broken.type, "op.error");
    assert.equal(broken.args.code, ErrorCode.ControlProtocol);
    assert.match(broken.args.error, /^params\.host: /);
    await cleanExec(c);
    await c.close();
  });

  it("refuses another organization, and a token revoked while its connection stays open", async () => {
    const other = await s.token("cproxy-other");
    for (const prefix of ["units", "sprites"]) {
      const r = await upgradeAnswer(`${ws}/v1/${prefix}/${UNIT}/control`, other);
      assert.equal(r.status, 404, r.body);
      assert.equal(JSON.parse(r.body).code, ErrorCode.UnitNotFound);
    }
    const mine = await s.token("cproxy");
    const c = await open("sprites", mine);
    c.startGoProxy({ port: ECHO });
    assert.equal((await c.nextJson()).status, "connected");
    c.release();
    const found = await s.server.store.tokens.authenticate(hashToken(mine));
    assert.ok(found);
    await s.server.store.tokens.revoke(found.token.id, new Date().toISOString());
    c.startGoProxy({ port: ECHO });
    const refused = await c.nextJson();
    assert.equal(refused.status, "error");
    assert.equal(refused.code, ErrorCode.Unauthorized);
    await c.close();
  });

  it(`counts towards the unit's ${MAX_TUNNELS_PER_UNIT} tunnels, and gives its place back`, async () => {
    const proxyUrl = `${ws}/v1/units/${UNIT}/proxy`;
    // Tunnels waiting for their open message count. The earlier tests' proxies give their places
    // back once their targets have ended (a released one that never ends: after CLOSE_GRACE_MS).
    const hold = async (n: number): Promise<TestTunnel[]> => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const got = await Promise.allSettled(
          Array.from({ length: n }, () => openTestTunnel(proxyUrl, token, undefined)),
        );
        const ok = got.flatMap((g) => (g.status === "fulfilled" ? [g.value] : []));
        if (ok.length === n) return ok;
        for (const t of ok) t.ws.terminate();
        assert.ok(Date.now() < deadline, `only ${ok.length} of ${n} tunnels could be held`);
        await new Promise((r) => setTimeout(r, 500));
      }
    };
    const waitFree = async () => {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const r = await upgradeAnswer(proxyUrl, token);
        if (r.status === 101) return;
        assert.ok(Date.now() < deadline, `still ${r.status}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const c = await open();
    let held: TestTunnel[] = await hold(MAX_TUNNELS_PER_UNIT);
    try {
      c.startGoProxy({ port: ECHO });
      const answer = await c.nextJson();
      assert.equal(answer.status, "error");
      assert.equal(answer.code, ErrorCode.TunnelLimit);
      c.release();
    } finally {
      for (const t of held) t.ws.terminate();
    }
    await waitFree();
    // A connected proxy op holds one place: the last /proxy is refused.
    c.startGoProxy({ port: ECHO });
    assert.equal((await c.nextJson()).status, "connected");
    held = await hold(MAX_TUNNELS_PER_UNIT - 1);
    try {
      const over = await upgradeAnswer(proxyUrl, token);
      assert.equal(over.status, 429, over.body);
      c.release();
    } finally {
      for (const t of held) t.ws.terminate();
    }
    await waitFree();
    await cleanExec(c);
    await c.close();
  });
});
