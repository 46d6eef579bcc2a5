import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import WebSocket from "ws";
import { startWithUnit, type TestServer } from "../../testing/server.js";
import { startTcpServer, stopTcpServer } from "../../testing/tcp-echo.js";
import { upgradeAnswer } from "../../testing/ws-upgrade.js";

type Message = Record<string, unknown>;

/** A port watch websocket: every text message, and a wait for one that matches. */
function watch(url: string, token: string) {
  return new Promise<{ ws: WebSocket; next: (pred: (m: Message) => boolean, ms?: number) => Promise<Message> }>(
    (resolve, reject) => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
      const seen: Message[] = [];
      let wake: (() => void) | null = null;
      ws.on("message", (d, isBinary) => {
        if (!isBinary) seen.push(JSON.parse(String(d)));
        wake?.();
      });
      const next = async (pred: (m: Message) => boolean, ms = 20_000) => {
        const deadline = Date.now() + ms;
        for (;;) {
          const i = seen.findIndex(pred);
          if (i >= 0) return seen.splice(0, i + 1).at(-1) as Message;
          if (Date.now() > deadline) throw new Error(`no such message; seen ${JSON.stringify(seen)}`);
          await new Promise<void>((r) => {
            wake = r;
            setTimeout(r, 200);
          });
        }
      };
      ws.once("open", () => resolve({ ws, next }));
      ws.once("error", reject);
    },
  );
}

/** Spec 6.5 on their own channel: `GET /v1/units/{name}/ports/watch`. */
describe("ports/watch", { timeout: 180_000 }, () => {
  let s: TestServer;
  let token: string;
  let ws: string;
  let unitUrl: string;

  before(async () => {
    ({ s, token } = await startWithUnit("ports", "pw"));
    ws = s.url.replace("http", "ws");
    unitUrl = (await s.api("GET", "/v1/units/pw", { token })).body.url;
  });
  after(() => s?.close());

  it("lists the ports listening, then reports a port opening and closing with its pid", async () => {
    const before = await startTcpServer(s.url, token, "pw", "echo", 7100);
    const w = await watch(`${ws}/v1/units/pw/ports/watch`, token);
    try {
      const first = await w.next(() => true);
      assert.equal(first.type, "ports");
      const listed = (first.ports as Message[]).find((p) => p.port === 7100);
      assert.deepEqual(listed, { port: 7100, address: unitUrl, pid: before });

      const pid = await startTcpServer(s.url, token, "pw", "echo", 7101);
      const opened = await w.next((m) => m.type === "port_opened" && m.port === 7101);
      assert.deepEqual(opened, { type: "port_opened", port: 7101, address: unitUrl, pid });
      await stopTcpServer(s.url, token, "pw", pid);
      const closed = await w.next((m) => m.type === "port_closed" && m.port === 7101);
      assert.deepEqual(closed, { type: "port_closed", port: 7101, address: unitUrl, pid });
    } finally {
      w.ws.close();
      await stopTcpServer(s.url, token, "pw", before);
    }
  });

  it("is served under /v1/sprites too, is a websocket only, and another organization's unit is not found", async () => {
    const w = await watch(`${ws}/v1/sprites/pw/ports/watch`, token);
    assert.equal((await w.next(() => true)).type, "ports");
    w.ws.close();
    const plain = await s.api("GET", "/v1/units/pw/ports/watch", { token });
    assert.equal(plain.status, 400);
    const other = await s.token("ports-other");
    for (const prefix of ["units", "sprites"]) {
      const r = await upgradeAnswer(`${ws}/v1/${prefix}/pw/ports/watch`, other);
      assert.equal(r.status, 404, r.body);
      assert.equal(JSON.parse(r.body).code, ErrorCode.UnitNotFound);
    }
    assert.equal((await s.api("GET", "/v1/units/pw/ports/watch", { token: other })).status, 404);
  });
});
