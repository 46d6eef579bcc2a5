// Issue #20 part 5: a unit has at most MAX_WEBSOCKETS_PER_UNIT websockets to its agent open at
// once; one more is refused with 429 before any upgrade, and a closed one frees its place.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { startWithUnit, type TestServer } from "../../testing/server.js";
import { MAX_WEBSOCKETS_PER_UNIT } from "./websockets.js";

function open(url: string, token: string): Promise<{ status: number; ws?: WebSocket; body?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d) => {
        body += d;
      });
      res.on("end", () => {
        resolve({ status: res.statusCode ?? 0, body });
        ws.terminate();
      });
    });
    ws.once("open", () => resolve({ status: 101, ws }));
    ws.on("error", reject);
  });
}

describe("websockets per unit", { timeout: 180_000 }, () => {
  let s: TestServer;
  let token: string;
  const sockets: WebSocket[] = [];
  before(async () => {
    ({ s, token } = await startWithUnit("acme", "busy"));
  });
  after(async () => {
    for (const ws of sockets) ws.terminate();
    await s?.close();
  });

  it(`the ${MAX_WEBSOCKETS_PER_UNIT + 1}th is refused with 429 UMS_WEBSOCKET_LIMIT; closing one frees a place`, async () => {
    const url = `${s.url.replace(/^http/, "ws")}/v1/units/busy/fs/watch`;
    for (let i = 0; i < MAX_WEBSOCKETS_PER_UNIT; i += 16) {
      const batch = await Promise.all(Array.from({ length: 16 }, () => open(url, token)));
      for (const r of batch) {
        assert.equal(r.status, 101, r.body);
        sockets.push(r.ws as WebSocket);
      }
    }
    const refused = await open(url, token);
    assert.equal(refused.status, 429);
    assert.equal(JSON.parse(refused.body ?? "{}").code, "UMS_WEBSOCKET_LIMIT");
    // Another unit of the organization is not affected.
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "other" } })).status, 201);
    const other = await open(`${s.url.replace(/^http/, "ws")}/v1/units/other/fs/watch`, token);
    assert.equal(other.status, 101);
    other.ws?.close();
    // One closed: its place is free again (the count follows the agent side's close).
    const closed = new Promise((r) => sockets[0]?.once("close", r));
    sockets[0]?.close();
    await closed;
    for (let i = 0; ; i++) {
      const again = await open(url, token);
      if (again.status === 101) {
        sockets.push(again.ws as WebSocket);
        break;
      }
      assert.ok(i < 50, `still refused: ${again.body}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });
});
