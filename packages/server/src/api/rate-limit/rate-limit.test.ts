// Issue #20 part 5: rate limits per token and per organization, through the HTTP API of a real
// server: 429 with Retry-After and a code, the other token and organization unaffected.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

/** The HTTP status a websocket upgrade is answered with (101 when it is accepted). */
function upgradeStatus(url: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    ws.once("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
      ws.terminate();
    });
    ws.once("open", () => {
      resolve(101);
      ws.terminate();
    });
    ws.on("error", reject);
  });
}

describe("rate limits per token and per organization", () => {
  let s: TestServer;
  before(async () => {
    // 1 request a second, bursts of 10 per token; 15 bursts per organization.
    s = await startSqliteServer({ rateLimitToken: "1/s", rateLimitOrg: "1.5/s" });
  });
  after(() => s?.close());

  it("a token over its limit gets 429 with Retry-After; another organization is not slowed", async () => {
    const alice = await s.token("alice");
    const bob = await s.token("bob");
    const statuses: number[] = [];
    let refused: Awaited<ReturnType<TestServer["api"]>> | undefined;
    for (let i = 0; i < 12; i++) {
      const r = await s.api("GET", "/v1/units", { token: alice });
      statuses.push(r.status);
      if (r.status === 429) refused ??= r;
    }
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(200), statuses.join());
    assert.ok(refused, `no 429 in ${statuses.join()}`);
    assert.equal(refused.body.code, "UMS_RATE_LIMITED");
    assert.match(refused.body.error, /this token sends more than 1 requests a second/);
    const wait = Number(refused.headers.get("retry-after"));
    assert.ok(Number.isInteger(wait) && wait >= 1 && wait <= 2, `Retry-After: ${wait}`);
    // Websocket upgrades are counted too: refused before any upgrade.
    assert.equal(await upgradeStatus(`${s.url.replace(/^http/, "ws")}/v1/units/x/exec?cmd=true`, alice), 429);
    assert.equal((await s.api("GET", "/v1/units", { token: bob })).status, 200, "bob's organization has its own limit");
    // After Retry-After seconds the token is served again.
    await new Promise((r) => setTimeout(r, wait * 1000));
    assert.equal((await s.api("GET", "/v1/units", { token: alice })).status, 200);
  });

  it("the organization's limit holds across its tokens", async () => {
    const t1 = await s.token("carol");
    const t2 = await s.token("carol");
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) statuses.push((await s.api("GET", "/v1/units", { token: t1 })).status);
    let orgRefusal: Awaited<ReturnType<TestServer["api"]>> | undefined;
    for (let i = 0; i < 9; i++) {
      const r = await s.api("GET", "/v1/units", { token: t2 });
      statuses.push(r.status);
      if (r.status === 429) orgRefusal ??= r;
    }
    // Each token alone stays under its 10, the organization's 15 runs out.
    assert.ok(orgRefusal, statuses.join());
    assert.match(orgRefusal.body.error, /organization 'carol' sends more than 1\.5 requests a second/);
    assert.ok(Number(orgRefusal.headers.get("retry-after")) >= 1);
  });
});
