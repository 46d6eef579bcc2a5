// Issue #16 part 2: the unit URL's fast path (fast-path.ts), through a real server and real units,
// on raw connections (so that keep-alive, pipelining and every byte are the test's own). What it
// forwards behaves as the API's path does; what it does not take (malformed or ambiguous requests,
// logins, websockets, chunked uploads) goes to the API's path on the same connection; a unit's
// malformed answer is a 502, never a desynchronised connection; revocation holds per request.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { PassThrough } from "node:stream";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";
import { startUnitApp } from "../../testing/unit-app.js";

interface Reply {
  readonly status: number;
  readonly headers: Map<string, string[]>;
  readonly body: Buffer;
}

/** Writes `chunks` (with `gapMs` between them) on one connection; resolves with all it read when it closes (or at `waitMs`). */
function talk(url: string, chunks: (string | Buffer)[], opts: { gapMs?: number; waitMs?: number } = {}) {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const got: Buffer[] = [];
  socket.on("data", (d) => got.push(d));
  socket.on("error", () => {});
  const t0 = Date.now();
  const done = new Promise<{ bytes: Buffer; closed: boolean; ms: number }>((resolve) => {
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ bytes: Buffer.concat(got), closed: false, ms: Date.now() - t0 });
    }, opts.waitMs ?? 15_000);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ bytes: Buffer.concat(got), closed: true, ms: Date.now() - t0 });
    });
  });
  void (async () => {
    for (const c of chunks) {
      if (socket.destroyed) return;
      socket.write(c);
      if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
    }
  })();
  return { socket, done };
}

/** The responses in `bytes`, read by Content-Length, chunked framing or the close; HEAD answers have no body. */
function replies(bytes: Buffer, heads: readonly boolean[] = []): Reply[] {
  const out: Reply[] = [];
  let at = 0;
  while (at < bytes.length) {
    const end = bytes.indexOf("\r\n\r\n", at);
    if (end < 0) throw new Error(`a partial head: ${bytes.subarray(at).toString("latin1").slice(0, 200)}`);
    const lines = bytes.subarray(at, end).toString("latin1").split("\r\n");
    const status = Number((lines[0] ?? "").split(" ")[1]);
    const headers = new Map<string, string[]>();
    for (const l of lines.slice(1)) {
      const i = l.indexOf(":");
      const k = l.slice(0, i).toLowerCase();
      headers.set(k, [...(headers.get(k) ?? []), l.slice(i + 1).trim()]);
    }
    at = end + 4;
    let body: Buffer = Buffer.alloc(0);
    if (status >= 200 && !heads[out.length] && status !== 204 && status !== 304) {
      const length = headers.get("content-length")?.[0];
      if (headers.get("transfer-encoding")?.[0] === "chunked") {
        const parts: Buffer[] = [];
        for (;;) {
          const eol = bytes.indexOf("\r\n", at);
          const size = Number.parseInt(bytes.subarray(at, eol).toString("latin1"), 16);
          at = eol + 2;
          if (size === 0) {
            at = bytes.indexOf("\r\n", at) + 2;
            break;
          }
          parts.push(bytes.subarray(at, at + size));
          at += size + 2;
        }
        body = Buffer.concat(parts);
      } else if (length !== undefined) {
        body = bytes.subarray(at, at + Number(length));
        at += Number(length);
      } else {
        body = bytes.subarray(at);
        at = bytes.length;
      }
    }
    out.push({ status, headers, body });
  }
  return out;
}

const json = (r: Reply) =>
  JSON.parse(r.body.toString()) as { path: string; method: string; headers: [string, string][]; body_len: number };
const header = (r: Reply, name: string) =>
  json(r)
    .headers.filter(([k]) => k.toLowerCase() === name)
    .map(([, v]) => v);

/** A unit app that answers raw bytes per path: broken and unusual HTTP from the unit's side. */
const RAW_APP = String.raw`
import socket, threading, time
ANSWERS = {
  "/cl-conflict": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
  "/te-and-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
  "/te-gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx",
  "/bad-field": b"HTTP/1.1 200 OK\r\nBad Field\r\nContent-Length: 2\r\n\r\nok",
  "/switch": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
  "/split-response": b"HTTP/1.1 200 OK\r\nSmuggled: 1\r\n",
  "/hints": b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
  "/extra": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled",
  "/huge-head": b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\nContent-Length: 2\r\n\r\nok",
}
def handle(c):
  buf = b""
  try:
    while True:
      while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d: return
        buf += d
      head, buf = buf.split(b"\r\n\r\n", 1)
      path = head.split(b" ")[1].decode()
      if path == "/slow-head":
        for part in [b"HTTP/1.1 200 OK\r\nCont", b"ent-Length: 5\r\n\r", b"\nhel", b"lo"]:
          c.sendall(part); time.sleep(0.05)
      elif path == "/until-close":
        c.sendall(b"HTTP/1.1 200 OK\r\n\r\nall of it"); return
      elif path == "/cut":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"); return
      else:
        c.sendall(ANSWERS.get(path, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
  finally:
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 8080)); s.listen(64)
while True:
  c, _ = s.accept(); threading.Thread(target=handle, args=(c,), daemon=True).start()
`;

describe("unit URL fast path", { timeout: 240_000 }, () => {
  let s: TestServer;
  let admin: string;
  let site: string;
  let raw: string;
  const logs: string[] = [];

  /** Forwarded requests the fast path logged since `from` (its log lines say `fast`). */
  const fastLines = (from: number) => logs.slice(from).filter((l) => l.includes('"fast":true'));
  const get = (host: string, path: string, extra = "") =>
    `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${admin}\r\n${extra}\r\n`;

  before(async () => {
    const logStream = new PassThrough();
    logStream.on("data", (d) => logs.push(...d.toString().split("\n").filter(Boolean)));
    s = await startSqliteServer({ logStream, headersTimeout: "2s", bodyIdleTimeout: "2s" });
    admin = await s.token("fast-org");
    const made = await s.api("POST", "/v1/units", { token: admin, json: { name: "site" } });
    assert.equal(made.status, 201);
    site = new URL(made.body.url).host;
    await startUnitApp(s.url, admin, "site");
    const other = await s.api("POST", "/v1/units", { token: admin, json: { name: "raw" } });
    assert.equal(other.status, 201);
    raw = new URL(other.body.url).host;
    const w = await execHttp(s.url, admin, "raw", ["sh", "-c", "cat > /tmp/raw.py"], { stdin: RAW_APP });
    assert.equal(w.exitCode, 0);
    await execHttp(s.url, admin, "raw", [
      "sh",
      "-c",
      "setsid nohup python3 /tmp/raw.py </dev/null >/tmp/raw.log 2>&1 &",
    ]);
    for (let i = 0; ; i++) {
      const probe = await execHttp(s.url, admin, "raw", [
        "python3",
        "-c",
        "import socket; socket.create_connection(('127.0.0.1', 8080), 1).close()",
      ]);
      if (probe.exitCode === 0) break;
      assert.ok(i < 100, "the raw app did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  after(() => s?.close());

  it("forwards pipelined requests on one connection in order, with the proxy's header rules", async () => {
    const from = logs.length;
    const { done } = talk(s.url, [
      get(site, "/p1") + get(site, "/p2", "X-Forwarded-Host: evil\r\n") + get(site, "/p3", "Connection: close\r\n"),
    ]);
    const { bytes, closed } = await done;
    assert.ok(closed, "Connection: close ends it");
    const r = replies(bytes);
    assert.deepEqual(
      r.map((x) => [x.status, json(x).path]),
      [
        [200, "/p1"],
        [200, "/p2"],
        [200, "/p3"],
      ],
    );
    const second = r[1] as Reply;
    assert.deepEqual(header(second, "authorization"), [], "the ums token never reaches the unit");
    assert.deepEqual(header(second, "x-forwarded-host"), [site], "ours, not the client's");
    assert.deepEqual(header(second, "x-forwarded-for"), ["127.0.0.1"]);
    assert.deepEqual(second.headers.get("set-cookie"), ["a=1; Path=/", "b=2; Path=/"], "repeated fields kept");
    assert.deepEqual(r[2]?.headers.get("connection"), ["close"]);
    assert.equal(fastLines(from).length, 3, "all three went the fast path");
  });

  it("a body goes to the unit and its chunked answer comes back whole; HEAD has no body; the connection goes on", async () => {
    const body = "x".repeat(100_000);
    const { done } = talk(
      s.url,
      [
        `POST /echo HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nContent-Length: ${body.length}\r\n\r\n`,
        body.slice(0, 30_000),
        body.slice(30_000),
        `HEAD /h HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\n\r\n`,
        get(site, "/after", "Connection: close\r\n"),
      ],
      { gapMs: 50 },
    );
    const got = await done;
    const r = replies(got.bytes, [false, true, false]);
    assert.equal(r[0]?.status, 200, `${got.closed} ${got.ms} ${got.bytes.toString("latin1").slice(0, 300)}`);
    assert.equal(r[0]?.headers.get("transfer-encoding")?.[0], "chunked");
    assert.equal(r[0]?.body.toString(), body);
    assert.equal(r[1]?.status, 200);
    assert.equal(r[1]?.body.length, 0);
    assert.equal(json(r[2] as Reply).path, "/after");
  });

  it("hands the connection to the API's path at a request it does not take, bytes intact", async () => {
    const from = logs.length;
    const chunkedPost = `POST /chunked HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n`;
    const { done } = talk(s.url, [
      get(site, "/f1"),
      `GET /.ums/login HTTP/1.1\r\nHost: ${site}\r\n\r\n` + chunkedPost + get(site, "/f2", "Connection: close\r\n"),
    ]);
    const r = replies((await done).bytes);
    assert.deepEqual(
      r.map((x) => x.status),
      [200, 200, 200, 200],
    );
    assert.equal(json(r[0] as Reply).path, "/f1");
    assert.match(r[1]?.body.toString() ?? "", /<form/, "the login page");
    assert.equal(json(r[2] as Reply).body_len, 8, "the chunked body, reframed by the API's path");
    assert.equal(json(r[3] as Reply).path, "/f2");
    assert.equal(fastLines(from).length, 1, "only the first went the fast path");
  });

  it("reads through /v1/units/{name}/<path> take it too; API routes and writes take the API's path", async () => {
    const from = logs.length;
    const api = (method: string, path: string, extra = "") =>
      `${method} ${path} HTTP/1.1\r\nHost: ${new URL(s.url).host}\r\nAuthorization: Bearer ${admin}\r\n${extra}\r\n`;
    const first = replies(
      (
        await talk(s.url, [
          api("GET", "/v1/units/site/v1a?x=1") +
            api("GET", "/v1/sprites/site/v1b") +
            api("GET", "/v1/units/site/services") +
            api("GET", "/v1/units/site/v1c", "Connection: close\r\n"),
        ]).done
      ).bytes,
    );
    assert.deepEqual(
      first.map((x) => x.status),
      [200, 200, 200, 200],
    );
    assert.equal(json(first[0] as Reply).path, "/v1a?x=1");
    assert.deepEqual(header(first[0] as Reply, "authorization"), [], "the bearer token stays with ums");
    assert.equal(json(first[1] as Reply).path, "/v1b");
    assert.equal(
      JSON.parse(first[2]?.body.toString() ?? "{}").path,
      undefined,
      "the API's own route answered, not the unit",
    );
    assert.equal(json(first[3] as Reply).path, "/v1c");
    assert.equal(fastLines(from).length, 2, "the two reads before the API route went the fast path");
    const from2 = logs.length;
    const write = replies(
      (await talk(s.url, [api("POST", "/v1/units/site/w", "Content-Length: 2\r\nConnection: close\r\n") + "hi"]).done)
        .bytes,
    );
    assert.equal(json(write[0] as Reply).body_len, 2);
    assert.equal(fastLines(from2).length, 0, "a write is audited on the API's path");
    const unknown = replies((await talk(s.url, [api("GET", "/v1/units/nope/x", "Connection: close\r\n")]).done).bytes);
    assert.equal(unknown[0]?.status, 404);
    assert.equal(JSON.parse(unknown[0]?.body.toString() ?? "{}").code, "UMS_UNIT_NOT_FOUND");
  });

  it("a revoke or a change of url_settings holds from the next request on a kept connection", async () => {
    const minted = await s.api("POST", "/v1/organizations/fast-org/tokens", {
      token: admin,
      json: { description: "short-lived", role: "member" },
    });
    assert.equal(minted.status, 201, minted.text);
    const t = minted.body.token as string;
    const { socket, done } = talk(s.url, [], { waitMs: 20_000 });
    const next = async (head: string) => {
      const before = (socket as unknown as { bytesRead: number }).bytesRead;
      socket.write(head);
      for (let i = 0; i < 200 && socket.bytesRead === before; i++) await new Promise((r) => setTimeout(r, 25));
      await new Promise((r) => setTimeout(r, 100));
    };
    await next(`GET /before HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${t}\r\n\r\n`);
    const revoked = await s.api("DELETE", `/v1/organizations/fast-org/tokens/${minted.body.id}`, { token: admin });
    assert.equal(revoked.status, 204, revoked.text);
    await next(
      `GET /after HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${t}\r\nAccept: application/json\r\n\r\n`,
    );
    await s.api("PUT", "/v1/units/site", { token: admin, json: { url_settings: { auth: "public" } } });
    await next(`GET /public HTTP/1.1\r\nHost: ${site}\r\n\r\n`);
    await s.api("PUT", "/v1/units/site", { token: admin, json: { url_settings: { auth: "unit" } } });
    socket.write(
      `GET /private-again HTTP/1.1\r\nHost: ${site}\r\nAccept: application/json\r\nConnection: close\r\n\r\n`,
    );
    const r = replies((await done).bytes);
    assert.deepEqual(
      r.map((x) => x.status),
      [200, 401, 200, 401],
    );
    assert.equal(JSON.parse(r[1]?.body.toString() ?? "{}").code, "UMS_UNAUTHORIZED");
  });

  it("ambiguous or malformed requests are refused before the unit sees anything of them", async () => {
    // Each smuggled request carries a token the unit URL takes: only the framing keeps it out.
    const smuggle = (marker: string) =>
      `GET /${marker} HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\n\r\n`;
    const cases: [string, string][] = [
      [
        "cl-and-te",
        `POST /a HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggle("smuggled-cl-te")}`,
      ],
      [
        "two-lengths",
        `POST /a HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nContent-Length: 0\r\nContent-Length: 38\r\n\r\n${smuggle("smuggled-two-cl")}`,
      ],
      [
        "space-before-colon",
        `POST /a HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nContent-Length : 40\r\n\r\n${smuggle("smuggled-space")}`,
      ],
      [
        "obs-fold",
        `POST /a HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nX-A: 1\r\n Content-Length: 40\r\n\r\n${smuggle("smuggled-fold")}`,
      ],
      [
        "te-obfuscated",
        `POST /a HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nTransfer-Encoding: xchunked\r\nContent-Length: 0\r\n\r\n${smuggle("smuggled-te-x")}`,
      ],
      ["two-hosts", `GET /a HTTP/1.1\r\nHost: ${site}\r\nHost: ${raw}\r\nAuthorization: Bearer ${admin}\r\n\r\n`],
      ["bare-lf", `GET /smuggled-lf HTTP/1.1\nHost: ${site}\nAuthorization: Bearer ${admin}\n\n`],
    ];
    for (const [name, bytes] of cases) {
      const { bytes: got } = await talk(s.url, [bytes], { waitMs: 5_000 }).done;
      const text = got.toString("latin1");
      const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
      assert.ok(statuses.length > 0, `${name}: answered`);
      assert.ok(
        statuses.every((x) => x < 500),
        `${name}: never a 5xx (${statuses})`,
      );
      // The unit's app answers every request it reads with its path: none of them may be smuggled.
      assert.doesNotMatch(text, /"path": "\/smuggled/, `${name}: a smuggled request reached the unit`);
    }
  });

  it("a unit's malformed or unusual answers: 502 or passed on exactly, the connection never out of step", async () => {
    const ask = async (path: string, opts: { head?: boolean } = {}) => {
      const method = opts.head ? "HEAD" : "GET";
      const { bytes, closed } = await talk(s.url, [
        `${method} ${path} HTTP/1.1\r\nHost: ${raw}\r\nAuthorization: Bearer ${admin}\r\n\r\n` +
          get(raw, "/next", "Connection: close\r\n"),
      ]).done;
      return { bytes, closed };
    };
    for (const path of ["/cl-conflict", "/te-gzip", "/bad-field", "/switch", "/huge-head"]) {
      const { bytes } = await ask(path);
      const text = bytes.toString("latin1");
      assert.match(text, /^HTTP\/1\.1 502 /, `${path}: ${text.slice(0, 120)}`);
      assert.match(text, /UMS_UNIT_PROXY_FAILED/);
    }
    // Transfer-Encoding wins over Content-Length (RFC 9112 §6.3), which is not passed on.
    const te = replies((await ask("/te-and-cl")).bytes);
    assert.equal(te[0]?.body.toString(), "hello");
    assert.equal(te[0]?.headers.get("content-length"), undefined);
    assert.equal(te[1]?.body.toString(), "ok", "the next request is answered in step");
    // A head that arrives in pieces; an interim 103 before the answer.
    assert.equal(replies((await ask("/slow-head")).bytes)[0]?.body.toString(), "hello");
    const hints = replies((await ask("/hints")).bytes);
    assert.deepEqual(
      hints.map((x) => x.status),
      [103, 200, 200],
    );
    // Bytes after a response's end are not the client's: the next answer is the unit's next one.
    const extra = replies((await ask("/extra")).bytes);
    assert.deepEqual(
      extra.map((x) => x.body.toString()),
      ["ok", "ok"],
    );
    // An answer that ends with the connection: the client's ends with it too.
    const untilClose = await ask("/until-close");
    const uc = replies(untilClose.bytes);
    assert.equal(uc.length, 1);
    assert.equal(uc[0]?.body.toString(), "all of it");
    assert.deepEqual(uc[0]?.headers.get("connection"), ["close"]);
    // Cut short: the client's connection is closed before a whole body, so it cannot take it for one.
    const cut = await ask("/cut");
    assert.ok(cut.closed);
    assert.match(cut.bytes.toString("latin1"), /only this$/);
  });

  it("a body that stalls is answered 408 and the connection closed; a slow head is cut", async () => {
    const stalled = talk(s.url, [
      `POST /stall HTTP/1.1\r\nHost: ${site}\r\nAuthorization: Bearer ${admin}\r\nContent-Length: 100\r\n\r\nonly ten..`,
    ]);
    const { bytes, ms } = await stalled.done;
    assert.match(bytes.toString("latin1"), /^HTTP\/1\.1 408 /);
    assert.match(bytes.toString("latin1"), /UMS_REQUEST_TIMEOUT/);
    assert.ok(ms >= 1_900 && ms < 10_000, `${ms} ms`);
    const slow = talk(s.url, [`GET /slow HTTP/1.1\r\nHost: ${site}\r\n`, "X-Drip: 1\r\n", "X-Drip: 2\r\n"], {
      gapMs: 500,
    });
    const cutOff = await slow.done;
    assert.ok(cutOff.closed && cutOff.ms < 10_000, `closed after ${cutOff.ms} ms`);
    assert.doesNotMatch(cutOff.bytes.toString("latin1"), /^HTTP\/1\.1 [25]/);
  });

  it("a client gone mid-answer leaves the server answering", async () => {
    const gone = talk(s.url, [get(site, "/chunks")]);
    await new Promise((r) => setTimeout(r, 300));
    gone.socket.destroy();
    await gone.done;
    const r = replies((await talk(s.url, [get(site, "/still", "Connection: close\r\n")]).done).bytes);
    assert.equal(json(r[0] as Reply).path, "/still");
  });
});

describe("unit URL fast path: rate limits and stopping the server", { timeout: 120_000 }, () => {
  it("counts reads through /v1 against the token's rate limit; closes idle kept connections at once", async () => {
    const s = await startSqliteServer({ rateLimitToken: "2/s" });
    let closed = false;
    try {
      const token = await s.token("stop-org");
      const made = await s.api("POST", "/v1/units", {
        token,
        json: { name: "site", url_settings: { auth: "public" } },
      });
      assert.equal(made.status, 201);
      const host = new URL(made.body.url).host;
      await startUnitApp(s.url, token, "site");
      // Burst 20 at 2/s, for a token of its own: of 30 reads at once, the last ones are refused
      // (429, by the API's path).
      const reader = await s.token("stop-org");
      const apiHost = new URL(s.url).host;
      const reads = Array.from(
        { length: 30 },
        (_, i) => `GET /v1/units/site/r${i} HTTP/1.1\r\nHost: ${apiHost}\r\nAuthorization: Bearer ${reader}\r\n\r\n`,
      ).join("");
      const limited = talk(s.url, [reads], { waitMs: 3_000 });
      const statuses = replies((await limited.done).bytes).map((x) => x.status);
      assert.equal(statuses.length, 30);
      assert.ok(statuses.filter((x) => x === 429).length >= 8, `${statuses}`);
      assert.ok(statuses.filter((x) => x === 200).length <= 22, `${statuses}`);
      const kept = talk(s.url, [`GET /kept HTTP/1.1\r\nHost: ${host}\r\n\r\n`], { waitMs: 60_000 });
      for (let i = 0; i < 100 && kept.socket.bytesRead === 0; i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(kept.socket.bytesRead > 0, "answered");
      const t0 = Date.now();
      await s.close();
      closed = true;
      assert.ok(Date.now() - t0 < 10_000, `close took ${Date.now() - t0} ms`);
      assert.ok((await kept.done).closed);
    } finally {
      if (!closed) await s.close();
    }
  });
});
