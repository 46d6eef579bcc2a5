import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import type { Duplex } from "node:stream";
import { execHttp } from "./exec-client.js";

/**
 * For the proxy and unit URL tests: an HTTP server that runs INSIDE a unit on port 8080 (python3
 * of the test image, no libraries). `/echo` streams the request body back as it arrives (chunked),
 * `/chunks` sends three chunks 400 ms apart, `/late` its head
 * 800 ms before its body, an `Upgrade: websocket` request gets a minimal
 * RFC 6455 echo, anything else answers JSON with what arrived (method, path, headers, body size).
 */
export const UNIT_APP = String.raw`
import base64, hashlib, json, struct, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline().strip(): pass
                    return
                left = size
                while left:
                    b = self.rfile.read(min(left, 65536)); left -= len(b); yield b
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                b = self.rfile.read(min(left, 65536))
                if not b: return
                left -= len(b); yield b

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data)); self.wfile.flush()

    def chunked_head(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers(); self.wfile.flush()

    def frame(self, op, data):
        n = len(data)
        head = bytes([0x80 | op]) + (bytes([n]) if n < 126 else (bytes([126]) + struct.pack(">H", n) if n < 65536 else bytes([127]) + struct.pack(">Q", n)))
        self.wfile.write(head + data); self.wfile.flush()

    def ws(self):
        accept = base64.b64encode(hashlib.sha1((self.headers["Sec-WebSocket-Key"] + GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept); self.end_headers(); self.wfile.flush()
        self.frame(1, json.dumps({"path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}).encode())
        r = self.rfile
        while True:
            h = r.read(2)
            if len(h) < 2: break
            op, n = h[0] & 15, h[1] & 127
            if n == 126: n = struct.unpack(">H", r.read(2))[0]
            elif n == 127: n = struct.unpack(">Q", r.read(8))[0]
            mask = r.read(4) if h[1] & 128 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(n)))
            if op == 8: self.frame(8, data[:2]); break
            if op == 9: self.frame(10, data); continue
            if op in (1, 2): self.frame(op, data)
        self.close_connection = True

    def any(self):
        if self.headers.get("Upgrade", "").lower() == "websocket": return self.ws()
        if self.path.startswith("/echo"):
            self.chunked_head()
            for b in self.body(): self.chunk(b)
            return self.chunk(b"")
        if self.path.startswith("/late"):
            for b in self.body(): pass
            self.chunked_head(); time.sleep(0.8)
            self.chunk(b"late\n"); return self.chunk(b"")
        if self.path.startswith("/chunks"):
            for b in self.body(): pass
            self.chunked_head()
            for i in range(3):
                self.chunk(b"part%d\n" % i); time.sleep(0.4)
            return self.chunk(b"")
        if self.path.startswith("/bytes/"):
            # n zero bytes with a length (the proxy bench's download), written 1 MiB at a time
            for b in self.body(): pass
            size = int(self.path[len("/bytes/"):].split("?")[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block = bytes(1 << 20)
            while size > 0:
                self.wfile.write(block[:min(size, len(block))]); size -= len(block)
            return
        n = 0
        for b in self.body(): n += len(b)
        out = json.dumps({"method": self.command, "path": self.path, "headers": [[k, v] for k, v in self.headers.items()], "body_len": n}).encode()
        self.send_response(201 if self.path.startswith("/created") else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("X-Unit", "yes")
        self.send_header("Set-Cookie", "a=1; Path=/")
        self.send_header("Set-Cookie", "b=2; Path=/")
        self.end_headers()
        if self.command != "HEAD": self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = any

ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("0.0.0.0", 8080), H).serve_forever()
`;

/** Writes the app into the unit and starts it in the background (its own session, so it outlives the exec). */
export async function startUnitApp(baseUrl: string, token: string, unit: string): Promise<void> {
  const w = await execHttp(baseUrl, token, unit, ["sh", "-c", "cat > /tmp/unit-app.py"], { stdin: UNIT_APP });
  if (w.exitCode !== 0) throw new Error(`writing the app failed: ${w.stderr}`);
  const r = await execHttp(baseUrl, token, unit, [
    "sh",
    "-c",
    "setsid nohup python3 /tmp/unit-app.py </dev/null >/tmp/unit-app.log 2>&1 &",
  ]);
  if (r.exitCode !== 0) throw new Error(`starting the app failed: ${r.stderr}`);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const probe = await execHttp(baseUrl, token, unit, [
      "python3",
      "-c",
      "import socket; socket.create_connection(('127.0.0.1', 8080), 1).close()",
    ]);
    if (probe.exitCode === 0) return;
    if (Date.now() > deadline) throw new Error("the unit app did not start listening on 8080");
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface RawResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly body: Buffer;
  /** performance.now() of each body chunk's arrival. */
  readonly arrivals: number[];
  readonly chunks: Buffer[];
}

/** One HTTP request by node:http to `url` (a Host header may be given: unit URLs are sent to 127.0.0.1). */
export function request(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: Buffer | string | AsyncIterable<Buffer> } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? "GET", headers: opts.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      const arrivals: number[] = [];
      res.on("data", (c: Buffer) => {
        chunks.push(c);
        arrivals.push(performance.now());
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: Buffer.concat(chunks),
          arrivals,
          chunks,
        }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    const body = opts.body;
    if (body === undefined || typeof body === "string" || Buffer.isBuffer(body)) req.end(body);
    else
      void (async () => {
        for await (const c of body) if (!req.write(c)) await new Promise((r) => req.once("drain", r));
        req.end();
      })().catch(reject);
  });
}

/** A minimal websocket client over a raw socket: any Host, any path; resolves with the 101's socket. */
export function openWebsocket(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; socket: Duplex; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const key = randomBytes(16).toString("base64");
    const req = http.request(url, {
      agent: false,
      headers: {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": key,
        ...headers,
      },
    });
    req.on("upgrade", (res, socket, head) => {
      if (head.length > 0) socket.unshift(head);
      const expected = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
      if (res.headers["sec-websocket-accept"] !== expected) reject(new Error("bad Sec-WebSocket-Accept"));
      resolve({ status: 101, socket, headers: res.headers });
    });
    req.on("response", (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, socket: res.socket, headers: res.headers });
    });
    req.on("error", reject);
    req.end();
  });
}

/** Sends one masked text frame. */
export function sendText(socket: Duplex, text: string): void {
  const data = Buffer.from(text);
  const mask = randomBytes(4);
  const len = data.length;
  const head =
    len < 126
      ? Buffer.from([0x81, 0x80 | len])
      : Buffer.concat([Buffer.from([0x81, 0x80 | 126]), Buffer.from([len >> 8, len & 255])]);
  const masked = Buffer.from(data.map((b, i) => b ^ (mask[i % 4] ?? 0)));
  socket.write(Buffer.concat([head, mask, masked]));
}

/** Reads unmasked server frames as they come: resolves with the payloads of the first `n` frames. */
export function readFrames(socket: Duplex, n: number, timeoutMs = 5000): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const out: Buffer[] = [];
    const timer = setTimeout(() => reject(new Error(`got ${out.length} of ${n} frames`)), timeoutMs);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (buf.length < 2) return;
        let len = (buf[1] ?? 0) & 127;
        let off = 2;
        if (len === 126) {
          if (buf.length < 4) return;
          len = buf.readUInt16BE(2);
          off = 4;
        }
        if (buf.length < off + len) return;
        out.push(buf.subarray(off, off + len));
        buf = buf.subarray(off + len);
        if (out.length === n) {
          clearTimeout(timer);
          socket.off("data", onData);
          resolve(out);
          return;
        }
      }
    };
    socket.on("data", onData);
  });
}
