import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { execHttp } from "../../testing/exec-client.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { openWebsocket, readFrames, request, sendText, startUnitApp, UNIT_APP } from "../../testing/unit-app.js";

const sqlite = testDialects[0];
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const header = (headers: [string, string][], name: string) =>
  headers.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);

/** Spec 4.1: /v1/units/{name}/<path> is forwarded to the unit's port 8080. */
describe("proxy to a unit's HTTP target", () => {
  let s: TestServer;
  let token: string;
  const base = () => `${s.url}/v1/units/web`;
  const auth = () => ({ authorization: `Bearer ${token}` });

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    token = await s.token("proxy");
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "web" } })).status, 201);
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "empty" } })).status, 201);
    await startUnitApp(s.url, token, "web");
  });
  after(() => s?.close());

  it("forwards method, path, query and headers; the response comes back as is", async () => {
    const r = await request(`${base()}/created/a%20b/c?x=1&y=%2F`, {
      method: "PUT",
      headers: { ...auth(), "x-custom": "v", "content-type": "text/plain", "x-forwarded-for": "203.0.113.9" },
      body: "hello",
    });
    assert.equal(r.status, 201);
    assert.equal(r.headers["x-unit"], "yes");
    assert.deepEqual(r.headers["set-cookie"], ["a=1; Path=/", "b=2; Path=/"], "repeated headers kept");
    const seen = JSON.parse(r.body.toString());
    assert.equal(seen.method, "PUT");
    assert.equal(seen.path, "/created/a%20b/c?x=1&y=%2F");
    assert.equal(seen.body_len, 5);
    assert.deepEqual(header(seen.headers, "x-custom"), ["v"]);
    assert.deepEqual(header(seen.headers, "authorization"), [], "the ums token never reaches the unit");
    assert.deepEqual(header(seen.headers, "x-forwarded-for"), ["203.0.113.9, 127.0.0.1"]);
    assert.deepEqual(header(seen.headers, "x-forwarded-host"), [new URL(s.url).host]);
    assert.deepEqual(header(seen.headers, "x-forwarded-proto"), ["http"]);
    assert.match(header(seen.headers, "forwarded")[0] ?? "", /for=127\.0\.0\.1;host=".+";proto=http$/);
  });

  it("strips hop-by-hop headers both ways", async () => {
    const r = await request(`${base()}/inspect`, {
      headers: {
        ...auth(),
        connection: "keep-alive, x-secret-hop",
        "x-secret-hop": "1",
        te: "trailers",
        "keep-alive": "5",
      },
    });
    const seen = JSON.parse(r.body.toString());
    for (const h of ["x-secret-hop", "te", "keep-alive", "proxy-authorization"]) {
      assert.deepEqual(header(seen.headers, h), [], `${h} not forwarded`);
    }
  });

  it("GET and HEAD on the unit's root", async () => {
    const r = await request(`${base()}/`, { headers: auth() });
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.body.toString()).path, "/");
    const h = await request(`${base()}/x`, { method: "HEAD", headers: auth() });
    assert.equal(h.status, 200);
    assert.equal(h.body.length, 0);
  });

  it("streams 1 MiB request and response bodies, chunked and with a length", async () => {
    const data = randomBytes(1024 * 1024);
    const fixed = await request(`${base()}/echo`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/octet-stream" },
      body: data,
    });
    assert.equal(fixed.status, 200);
    assert.equal(sha(fixed.body), sha(data));
    assert.ok(fixed.chunks.length > 1, "the response arrived in pieces");
    async function* pieces() {
      for (let i = 0; i < data.length; i += 64 * 1024) yield data.subarray(i, i + 64 * 1024);
    }
    const chunked = await request(`${base()}/echo`, {
      method: "POST",
      headers: { ...auth(), "content-type": "application/octet-stream", "transfer-encoding": "chunked" },
      body: pieces(),
    });
    assert.equal(sha(chunked.body), sha(data));
  });

  it("passes chunked responses on as they arrive", async () => {
    const t0 = performance.now();
    const r = await request(`${base()}/chunks`, { headers: auth() });
    assert.equal(r.body.toString(), "part0\npart1\npart2\n");
    assert.ok(r.chunks.length >= 3, `got ${r.chunks.length} chunks`);
    const first = (r.arrivals[0] ?? 0) - t0;
    const last = (r.arrivals.at(-1) ?? 0) - t0;
    assert.ok(last - first >= 600, `chunks spread over time (first ${first} ms, last ${last} ms)`);
  });

  it("passes a response head on before its body arrives", async () => {
    const t0 = performance.now();
    const head = await new Promise<{ at: number; res: http.IncomingMessage }>((resolve, reject) =>
      http
        .get(`${base()}/late`, { headers: auth() }, (res) => resolve({ at: performance.now() - t0, res }))
        .on("error", reject),
    );
    let body = "";
    for await (const chunk of head.res) body += chunk;
    const end = performance.now() - t0;
    assert.equal(body, "late\n");
    assert.ok(end - head.at >= 600, `head at ${head.at.toFixed(0)} ms, body done at ${end.toFixed(0)} ms`);
  });

  it("carries websockets both ways", async () => {
    const ws = await openWebsocket(`${base()}/ws/path?q=1`, auth());
    assert.equal(ws.status, 101);
    const [hello] = await readFrames(ws.socket, 1);
    const info = JSON.parse(String(hello));
    assert.equal(info.path, "/ws/path?q=1");
    assert.deepEqual(header(info.headers, "authorization"), []);
    for (const m of ["one", "two", "x".repeat(5000)]) {
      sendText(ws.socket, m);
      assert.equal(String((await readFrames(ws.socket, 1))[0]), m);
    }
    ws.socket.destroy();
  });

  it("answers 401 and 404 before touching the unit, over HTTP and websockets", async () => {
    assert.equal((await request(`${base()}/x`)).status, 401);
    assert.equal((await openWebsocket(`${base()}/ws`)).status, 401);
    const missing = await request(`${s.url}/v1/units/nope/x`, { headers: auth() });
    assert.equal(missing.status, 404);
    assert.equal(JSON.parse(missing.body.toString()).code, "UMS_UNIT_NOT_FOUND");
  });

  it("answers 502 UMS_UNIT_NO_LISTENER when nothing listens, also to a websocket", async () => {
    const r = await request(`${s.url}/v1/units/empty/anything`, { headers: auth() });
    assert.equal(r.status, 502);
    const body = JSON.parse(r.body.toString());
    assert.equal(body.code, "UMS_UNIT_NO_LISTENER");
    assert.match(body.error, /nothing listens on port 8080/);
    assert.equal((await openWebsocket(`${s.url}/v1/units/empty/ws`, auth())).status, 502);
  });

  it("survives clients that go away mid-exchange", async () => {
    await new Promise<void>((resolve) => {
      const req = http.request(`${base()}/chunks`, { headers: auth() }, (res) => {
        res.once("data", () => {
          req.destroy();
          resolve();
        });
      });
      req.on("error", () => {});
      req.end();
    });
    const r = await request(`${base()}/inspect`, { headers: auth() });
    assert.equal(r.status, 200);
  });
});

/** A proxied request wakes a cold unit (and holds it awake while it lasts). */
describe("proxy wakes a cold unit", () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite, { idleWarm: "1s", idleCold: "1s", sweepMs: 100 });
    token = await s.token("wake");
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "sleepy" } })).status, 201);
  });
  after(() => s?.close());

  it("boots the unit for the request", async () => {
    // The app a service would start: on the unit's disk, not running after a boot.
    const w = await execHttp(s.url, token, "sleepy", ["sh", "-c", "cat > /home/unit/app.py"], { stdin: UNIT_APP });
    assert.equal(w.exitCode, 0);
    const status = async () => (await s.api("GET", "/v1/units/sleepy", { token })).body.status;
    const deadline = Date.now() + 20_000;
    while ((await status()) !== "cold") {
      assert.ok(Date.now() < deadline, "the unit went cold");
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await request(`${s.url}/v1/units/sleepy/`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(r.status, 502, `booted; nothing listens after a fresh boot: ${r.body}`);
    assert.equal(JSON.parse(r.body.toString()).code, "UMS_UNIT_NO_LISTENER");
    assert.equal(await status(), "running");
  });

  it("holds the unit awake while a proxied websocket is open, and lets it idle after", async () => {
    await startUnitApp(s.url, token, "sleepy");
    const status = async () => (await s.api("GET", "/v1/units/sleepy", { token })).body.status;
    const ws = await openWebsocket(`${s.url}/v1/units/sleepy/ws`, { authorization: `Bearer ${token}` });
    assert.equal(ws.status, 101);
    await readFrames(ws.socket, 1);
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(await status(), "running", "idle timers of 1s do not pause a unit with an open connection");
    sendText(ws.socket, "still here");
    assert.equal(String((await readFrames(ws.socket, 1))[0]), "still here");
    ws.socket.destroy();
    const deadline = Date.now() + 10_000;
    while ((await status()) === "running") {
      assert.ok(Date.now() < deadline, "the unit idles once the connection is gone");
      await new Promise((r) => setTimeout(r, 100));
    }
  });
});
