import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer as createHttpServer, request } from "node:http";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { Writable } from "node:stream";
import { after, describe, it } from "node:test";
import { within } from "../util/within.js";
import { RelaySocket, relayPair } from "./relay.js";

/** Whether descriptor `fd` of this process is non-blocking (O_NONBLOCK in its open file's flags). */
function nonBlocking(fd: number): boolean {
  const flags = /flags:\s+(\d+)/.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))?.[1] ?? "0";
  return (Number.parseInt(flags, 8) & 0o4000) !== 0;
}

const pairDirs = () => readdirSync(tmpdir()).filter((d) => d.startsWith("ums-pair-"));

describe("relayPair: a child's stdout read into the server's own buffers (issue #15's sends)", () => {
  it("brings all a child writes, in order, through a slow reader, and leaves the server's socket non-blocking", async () => {
    const before = pairDirs();
    const { relay, peer } = await relayPair();
    assert.deepEqual(pairDirs(), before, "the listener's directory is gone once the pair is made");
    const fd = (relay.socket as unknown as { _handle: { fd: number } })._handle.fd;
    assert.ok(nonBlocking(fd));
    // 5 MB of numbered lines, so that order and completeness show.
    const child = spawn("sh", ["-c", "seq 1 600000"], { stdio: ["ignore", peer, "ignore"] });
    // Listened for at once: the child may be gone before the transfer's last bytes are written.
    const closed = new Promise((r) => child.once("close", r));
    peer.destroy();
    relay.beginRaw();
    const chunks: Buffer[] = [];
    const out = new Writable({
      highWaterMark: 4096,
      write(chunk: Buffer, _e, cb) {
        chunks.push(Buffer.from(chunk));
        setImmediate(cb);
      },
    });
    // While the child writes (it has its end of the pair then), the server's end stays non-blocking:
    // libuv makes a child's stdio blocking, on the open file, which is the child's end only.
    const flags: boolean[] = [];
    await relay.pumpTo(out, Buffer.alloc(0), () => {
      if (flags.length < 3) flags.push(nonBlocking(fd));
    });
    assert.deepEqual(flags, [true, true, true]);
    assert.equal(await closed, 0);
    const text = Buffer.concat(chunks).toString();
    const expected = `${Array.from({ length: 600000 }, (_, i) => i + 1).join("\n")}\n`;
    assert.equal(text.length, expected.length);
    assert.ok(text === expected, "every byte, in order");
    relay.socket.destroy();
  });

  it("a reader's `look` that throws stops the transfer", async () => {
    const { relay, peer } = await relayPair();
    const child = spawn("sh", ["-c", "head -c 3000000 /dev/zero"], { stdio: ["ignore", peer, "ignore"] });
    const closed = new Promise((r) => child.once("close", r));
    peer.destroy();
    relay.beginRaw();
    let seen = 0;
    const out = new Writable({ write: (_c, _e, cb) => cb() });
    await assert.rejects(
      relay.pumpTo(out, Buffer.alloc(0), (c) => {
        seen += c.length;
        if (seen > 1_000_000) throw new Error("enough");
      }),
      /enough/,
    );
    assert.ok(relay.socket.destroyed);
    await closed;
  });
});

/**
 * A server on loopback that answers any upgrade request with a 101 and then `body`, all in one
 * write, and ends the connection: an answer short enough to come whole in the client's first read.
 */
async function wholeAnswer(body: Buffer): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => {
    socket.on("error", () => {});
    socket.once("data", () => {
      socket.end(
        Buffer.concat([
          Buffer.from("HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: test\r\n\r\n"),
          body,
        ]),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  return { server, port: typeof address === "object" && address ? address.port : 0 };
}

/** The upgrade request over `relay` (as peers.ts makes a send's): the 101's socket and its head. */
function upgrade(relay: RelaySocket): Promise<{ socket: Socket; head: Buffer }> {
  const req = request({
    createConnection: () => relay.socket,
    method: "GET",
    path: "/",
    headers: { connection: "Upgrade", upgrade: "test" },
  });
  return new Promise((resolve, reject) => {
    req.once("upgrade", (_res, socket: Socket, head: Buffer) => {
      relay.beginRaw();
      resolve({ socket, head });
    });
    req.once("error", reject);
    req.end();
  });
}

describe("RelaySocket: a connection that ended before its bytes were taken", () => {
  const servers: Server[] = [];
  after(() => {
    for (const s of servers) s.close();
  });

  it("pumpTo brings a stream that came whole with the 101, and resolves (a CI move back hung here)", async () => {
    const body = Buffer.from("a short send stream\n".repeat(20));
    const { server, port } = await wholeAnswer(body);
    servers.push(server);
    const relay = new RelaySocket({ host: "127.0.0.1", port });
    const { socket, head } = await upgrade(relay);
    // As a receive does before it starts its child: the connection's end is read meanwhile.
    await new Promise((r) => socket.once("close", r));
    assert.ok(socket.readableEnded);
    const chunks: Buffer[] = [];
    const out = new Writable({
      write(chunk: Buffer, _e, cb) {
        chunks.push(Buffer.from(chunk));
        cb();
      },
    });
    const done = relay.pumpTo(out, head, () => {}).then(() => "done");
    assert.equal(await within(done, 5000, "not settled within 5000 ms"), "done");
    assert.ok(out.writableEnded, "the output is ended");
    assert.deepEqual(Buffer.concat(chunks), body);
  });

  it("pumpTo rejects a connection that broke before it was called", async () => {
    const { server, port } = await wholeAnswer(Buffer.from("part"));
    servers.push(server);
    const relay = new RelaySocket({ host: "127.0.0.1", port });
    const { socket, head } = await upgrade(relay);
    socket.destroy(new Error("reset by the test"));
    await new Promise((r) => socket.once("close", r));
    const out = new Writable({ write: (_c, _e, cb) => cb() });
    await assert.rejects(
      within(
        relay.pumpTo(out, head, () => {}),
        5000,
        "not settled within 5000 ms",
      ),
      /reset by the test/,
    );
  });

  it("relayTo answers with a body that came whole with the 101, and ends the answer", async () => {
    const body = Buffer.from("the whole of a small file\n");
    const { server, port } = await wholeAnswer(body);
    servers.push(server);
    let relayed: Promise<boolean> | undefined;
    const front = createHttpServer((_req, res) => {
      const relay = new RelaySocket({ host: "127.0.0.1", port });
      relayed = upgrade(relay).then(async ({ socket, head }) => {
        await new Promise((r) => socket.once("close", r));
        res.writeHead(200, { "content-length": body.length });
        return relay.relayTo(res, head, body.length);
      });
    });
    servers.push(front);
    await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));
    const address = front.address();
    const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/`;
    const res = await within(
      fetch(url).then(async (r) => ({ status: r.status, text: await r.text() })),
      5000,
      { status: 0, text: "no answer within 5000 ms" },
    );
    assert.equal(res.status, 200);
    assert.equal(res.text, body.toString());
    // The relay knows it is done (the client alone cannot tell: it had all content-length said).
    assert.equal(await within(relayed as Promise<boolean>, 5000, "not settled within 5000 ms"), true);
  });
});

describe("RelaySocket.firstLine: a node's answer to a wake, taken out before the agent client reads (issue #15)", () => {
  const servers: Server[] = [];
  after(() => {
    for (const s of servers) s.close();
  });
  /** A server that writes `parts` to each connection, one write per part a little apart, then `end`s or not. */
  const serving = async (parts: (string | Buffer)[], end = true) => {
    const server = createServer(async (s) => {
      s.on("error", () => {});
      for (const p of parts) {
        s.write(p);
        await new Promise((r) => setTimeout(r, 15));
      }
      if (end) s.end();
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return (server.address() as { port: number }).port;
  };
  const readAll = (socket: Socket) =>
    new Promise<string>((resolve) => {
      let text = "";
      socket.on("data", (d: Buffer) => {
        text += d.toString();
      });
      socket.once("close", () => resolve(text));
    });

  it("takes the line however it is cut, and leaves the rest to the socket's reader", async () => {
    for (const parts of [['{"lease":"a"}\nHTTP/1.1 200'], ['{"lea', 'se":"a"}', "\nHTTP/1", ".1 200"]]) {
      const port = await serving(parts);
      const relay = new RelaySocket({ host: "127.0.0.1", port });
      const line = relay.firstLine(1024);
      // Read from the start, as the agent client does once its request is written behind the wake.
      const rest = readAll(relay.socket);
      assert.equal(await within(line, 5000, "no line within 5000 ms"), '{"lease":"a"}');
      assert.equal(await within(rest, 5000, "no end within 5000 ms"), "HTTP/1.1 200");
    }
  });

  it("rejects a connection that closes before its line, and a line over the limit (the socket destroyed)", async () => {
    const cut = new RelaySocket({ host: "127.0.0.1", port: await serving(["no newline"]) });
    await assert.rejects(within(cut.firstLine(1024), 5000, "not settled"), /closed before its first line/);
    const long = new RelaySocket({ host: "127.0.0.1", port: await serving([Buffer.alloc(3000, "a")], false) });
    const seen = readAll(long.socket);
    await assert.rejects(within(long.firstLine(1024), 5000, "not settled"), /longer than 1024 bytes/);
    assert.equal(await within(seen, 5000, "not closed"), "", "nothing of the line reached the reader");
    assert.ok(long.socket.destroyed);
  });
});
