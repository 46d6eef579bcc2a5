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
// packages/agent/src/fs/fs.test.ts): one that reads raw, and one from before raw reads, which answers
// the upgrade request as an ordinary request.

const SWITCHING = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ums-fs\r\n\r\n";
const DATA = Buffer.from("0123456789".repeat(100_000));

/** A fake agent on a Unix socket: /fs/connect hands the connection to `inner`, as the real one does. */
function fakeAgent(path: string, inner: Server): Promise<Server> {
  const outer = createServer((_req, res) => res.writeHead(404).end());
  outer.on("upgrade", (_req, socket: Socket) => {
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
  raw.on("upgrade", (_req, socket: Socket) => {
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
      await fakeAgent(join(dir, "raw.sock"), raw),
      await fakeAgent(join(dir, "old.sock"), old),
      await fakeAgent(join(dir, "grown.sock"), grown),
    );
  });

  it("relays a raw read to a client response, whole and with its size", async () => {
    const read = await agentRead(plainEndpoint(join(dir, "raw.sock")), "user", "/f");
    assert.ok(!(read instanceof IncomingMessage));
    assert.equal(read.size, DATA.length);
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
