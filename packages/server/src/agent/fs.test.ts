import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, createServer, get, IncomingMessage, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { plainEndpoint } from "./deadline.js";
import { agentRead } from "./fs.js";

// agentRead against fake agents at the test edge (the real agent is tested in api/fs/fs.test.ts and
// packages/agent/src/fs/fs.test.ts): one that reads raw in one exchange, one that reads raw only on
// an fs connection (from before the one-step read), and one from before raw reads, which answers
// the upgrade request as an ordinary request.

const SWITCHING = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ums-fs\r\n\r\n";
const DATA = Buffer.from("0123456789".repeat(100_000));

/** Answers an upgrade request on `socket` with a 404 carrying `body` (JSON), and ends it. */
function notFound(socket: Socket, body: object): void {
  const text = JSON.stringify(body);
  socket.end(`HTTP/1.1 404 Not Found\r\ncontent-length: ${text.length}\r\n\r\n${text}`);
}

/** /fs/connect upgrades each fake agent took (the two-exchange read's first). */
const connects = new Map<string, number>();

/**
 * A fake agent on a Unix socket: /fs/connect hands the connection to `inner`, as the real one does;
 * a raw read asked of it (GET /fs/read upgraded) is `inner`'s in one exchange (`oneStep`), or has
 * no route, as in an agent from before the one-step read (404, UMS_NOT_FOUND).
 */
function fakeAgent(path: string, inner: Server, oneStep: boolean): Promise<Server> {
  const outer = createServer((_req, res) => res.writeHead(404).end());
  outer.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    if (req.url?.startsWith("/fs/read?")) {
      if (oneStep) return void inner.emit("upgrade", req, socket, head);
      return notFound(socket, { error: "no websocket route for GET /fs/read", code: "UMS_NOT_FOUND" });
    }
    connects.set(path, (connects.get(path) ?? 0) + 1);
    socket.write(SWITCHING);
    inner.emit("connection", socket);
  });
  return new Promise((resolve) => outer.listen(path, () => resolve(outer)));
}

describe("agentRead", () => {
  const dir = mkdtempSync(join(tmpdir(), "ums-agent-read-"));
  const servers: Server[] = [];
  after(() => {
    for (const s of servers) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const raw = createServer((_req, res) => res.writeHead(500).end());
  raw.on("upgrade", (req: IncomingMessage, socket: Socket) => {
    if (new URL(req.url ?? "/", "http://fs").searchParams.get("path") === "/missing") {
      return notFound(socket, { error: "no such file", code: "ENOENT", path: "/missing" });
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ums-fs-bytes\r\nX-Ums-Size: ${DATA.length}\r\n\r\n`,
    );
    socket.end(DATA);
  });
  // An agent that announces a size and sends more (the file grew while it was read; the real agent
  // now stops at the size, but the host must not trust it to).
  const grown = createServer((_req, res) => res.writeHead(500).end());
  grown.on("upgrade", (_req, socket: Socket) => {
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ums-fs-bytes\r\nX-Ums-Size: ${DATA.length}\r\n\r\n`,
    );
    socket.end(Buffer.concat([DATA, Buffer.from("grown meanwhile")]));
  });
  const old = createServer((req, res) => res.end(`old ${req.url?.slice(0, 8)}`));

  before(async () => {
    servers.push(
      await fakeAgent(join(dir, "raw.sock"), raw, true),
      await fakeAgent(join(dir, "raw-two-step.sock"), raw, false),
      await fakeAgent(join(dir, "old.sock"), old, false),
      await fakeAgent(join(dir, "grown.sock"), grown, true),
    );
  });

  for (const [agent, exchanges] of [
    ["raw.sock", 1],
    ["raw-two-step.sock", 2],
  ] as const)
    it(`relays a raw read to a client response, whole and with its size (${exchanges} exchange(s) with the agent)`, async () => {
      const before = connects.get(join(dir, agent)) ?? 0;
      const read = await agentRead(plainEndpoint(join(dir, agent)), "user", "/f");
      assert.ok(!(read instanceof IncomingMessage));
      assert.equal(read.size, DATA.length);
      assert.equal((connects.get(join(dir, agent)) ?? 0) - before, exchanges - 1, "fs connections made");
      const client = createServer((_req, res) => {
        res.writeHead(200, { "content-length": DATA.length });
        void read.relayTo(res);
      });
      servers.push(client);
      await new Promise<void>((resolve) => client.listen(0, "127.0.0.1", resolve));
      const body = await new Promise<Buffer>((resolve, reject) =>
        get(`http://127.0.0.1:${(client.address() as AddressInfo).port}/`, (res) => {
          const parts: Buffer[] = [];
          res.on("data", (d: Buffer) => parts.push(d));
          res.on("end", () => resolve(Buffer.concat(parts)));
        }).on("error", reject),
      );
      assert.ok(body.equals(DATA));
    });

  it("takes a file's 404 in one exchange as the read's error, not as an agent without the route", async () => {
    const before = connects.get(join(dir, "raw.sock")) ?? 0;
    await assert.rejects(agentRead(plainEndpoint(join(dir, "raw.sock")), "user", "/missing"), (err: Error) => {
      assert.equal((err as { code?: string }).code, "ENOENT");
      return true;
    });
    assert.equal(connects.get(join(dir, "raw.sock")) ?? 0, before, "no second exchange");
  });

  it("answers a file that grew during the read with its first size bytes, and keeps the connection", async () => {
    const client = createServer((_req, res) => {
      void agentRead(plainEndpoint(join(dir, "grown.sock")), "user", "/f").then((read) => {
        assert.ok(!(read instanceof IncomingMessage));
        res.writeHead(200, { "content-length": read.size });
        return read.relayTo(res);
      });
    });
    servers.push(client);
    await new Promise<void>((resolve) => client.listen(0, "127.0.0.1", resolve));
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<Socket>();
    const fetchOnce = () =>
      new Promise<Buffer>((resolve, reject) =>
        get(`http://127.0.0.1:${(client.address() as AddressInfo).port}/`, { agent }, (res) => {
          sockets.add(res.socket as Socket);
          const parts: Buffer[] = [];
          res.on("data", (d: Buffer) => parts.push(d));
          res.on("end", () => resolve(Buffer.concat(parts)));
          res.on("error", reject);
        }).on("error", reject),
      );
    try {
      assert.ok((await fetchOnce()).equals(DATA));
      // The next request goes out on the same connection, and is answered whole.
      assert.ok((await fetchOnce()).equals(DATA));
      assert.equal(sockets.size, 1, "both requests went over one kept-alive connection");
    } finally {
      agent.destroy();
    }
  });

  it("hands back the ordinary answer of an agent from before raw reads", async () => {
    const read = await agentRead(plainEndpoint(join(dir, "old.sock")), "user", "/f");
    assert.ok(read instanceof IncomingMessage);
    assert.equal(read.statusCode, 200);
    let text = "";
    for await (const chunk of read) text += chunk;
    assert.equal(text, "old /fs/read");
  });
});
