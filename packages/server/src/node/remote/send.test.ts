import assert from "node:assert/strict";
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import type { Socket } from "node:net";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { startChild } from "../../replication/children.js";
import { type RawSendStream, receiveSnapshot, sendSnapshot } from "../../replication/direct.js";
import { StreamChecker } from "../../replication/receive-check.js";
import { describeTree, makeSubvolume, poolScratch, randomFile } from "../../replication/test-fixtures.js";
import { snapshot } from "../../runtime/storage/btrfs.js";
import type { Store } from "../../store/store.js";
import { UnitUnavailableError } from "../errors.js";
import type { LocalNode } from "../local/local-node.js";
import { NodeEndpoint } from "./node-endpoint.js";
import { PeerNodes } from "./peers.js";

const root = process.getuid?.() === 0;
const secret = "s".repeat(40);

/** A send stream's bytes as btrfs writes them: its header, then commands (length, command, crc, attributes). */
function stream(commands: Array<{ cmd: number; attrs?: Buffer }>): Buffer {
  const parts: Buffer[] = [Buffer.from("btrfs-stream\0", "latin1"), Buffer.from([2, 0, 0, 0])];
  for (const c of commands) {
    const attrs = c.attrs ?? Buffer.alloc(0);
    const h = Buffer.alloc(10);
    h.writeUInt32LE(attrs.length, 0);
    h.writeUInt16LE(c.cmd, 4);
    parts.push(h, attrs);
  }
  return Buffer.concat(parts);
}
/** A path attribute (type 15). */
const pathAttr = (p: string) => {
  const v = Buffer.from(p);
  const h = Buffer.alloc(4);
  h.writeUInt16LE(15, 0);
  h.writeUInt16LE(v.length, 2);
  return Buffer.concat([h, v]);
};
/** Where each command of a stream begins. */
function commandOffsets(b: Buffer): number[] {
  const out: number[] = [];
  for (let o = 17; o + 10 <= b.length; o += 10 + b.readUInt32LE(o)) out.push(o);
  return out;
}

describe("StreamChecker: a send stream checked as it passes", () => {
  const whole = stream([
    { cmd: 1, attrs: pathAttr("cp-1") },
    { cmd: 15, attrs: Buffer.alloc(3000, 7) },
    { cmd: 15, attrs: Buffer.alloc(70_000, 8) },
    { cmd: 21 },
  ]);
  const feed = (b: Buffer, cuts: number[], requireEnd = true) => {
    const c = new StreamChecker("cp-1", false, requireEnd);
    let at = 0;
    for (const cut of [...cuts, b.length]) {
      c.look(b.subarray(at, cut));
      at = cut;
    }
    c.end();
    return c.bytes;
  };

  it("a whole stream passes however it is cut into chunks", () => {
    for (let cut = 1; cut < whole.length; cut += cut < 200 ? 1 : 997) {
      assert.equal(feed(whole, [cut]), whole.length, `cut at ${cut}`);
    }
    assert.equal(
      feed(
        whole,
        Array.from({ length: 40 }, (_, i) => 30 + i),
      ),
      whole.length,
    );
  });

  it("attack: a stream ended cleanly before its end command (at a command's boundary or inside one) is cut short", () => {
    for (const end of [...commandOffsets(whole), whole.length - 5, 5000]) {
      assert.throws(() => feed(whole.subarray(0, end), []), /cut short|before its first command/, `ends at ${end}`);
    }
    // Without requireEnd (a framed body, whose framing says it is whole) only the first command is checked.
    assert.equal(feed(whole.subarray(0, commandOffsets(whole)[2]), [], false), commandOffsets(whole)[2]);
  });

  it("attack: bytes past the end command, another subvolume, another first command are refused", () => {
    assert.throws(() => feed(Buffer.concat([whole, stream([{ cmd: 21 }]).subarray(17)]), []), /past its end command/);
    const other = stream([{ cmd: 1, attrs: pathAttr("../x") }, { cmd: 21 }]);
    assert.throws(() => feed(other, [20]), /makes subvolume "..\/x"/);
    assert.throws(() => feed(stream([{ cmd: 2, attrs: pathAttr("cp-1") }, { cmd: 21 }]), []), /first command 2/);
  });
});

/**
 * Issue #15: a node's checkpoint sent to another as raw bytes after an upgrade (node-endpoint.ts
 * `sendRaw`, peers.ts), against a node endpoint whose sends are stand-in commands: the bytes come
 * whole; a send that fails is a reset; an older node (404) is asked the framed way; a request
 * without the secret or with bad arguments is refused.
 */
describe("a checkpoint sent from node to node (upgraded, raw)", () => {
  let endpoint: NodeEndpoint;
  /** The command the stand-in node runs as `btrfs send`, its stdout the stream. */
  let sendScript = "true";
  let sent: unknown[] = [];
  const fakeNode = {
    async sendCheckpoint(unitId: string, checkpointId: string, have: string[], stdout?: Socket) {
      sent = [unitId, checkpointId, have];
      if (checkpointId === "absent") throw new UnitUnavailableError("checkpoint absent of unit u1 is not on this node");
      return {
        parent: have[0] ?? null,
        child: startChild("sh", ["-c", sendScript], ["ignore", stdout ?? "pipe", "pipe"]),
      };
    },
  } as unknown as LocalNode;
  const peersAt = (port: number) =>
    new PeerNodes(
      { nodes: { get: async (id: string) => ({ id, name: "n2", address: `127.0.0.1:${port}` }) } } as unknown as Store,
      secret,
    );
  /** Everything a raw send brings, through `look`. */
  const drain = async (body: RawSendStream | NodeJS.ReadableStream, look: (b: Buffer) => void = () => {}) => {
    const chunks: Buffer[] = [];
    // A slow consumer: the sender is held back, nothing is lost.
    const out = new Writable({
      highWaterMark: 1024,
      write(chunk: Buffer, _e, cb) {
        chunks.push(Buffer.from(chunk));
        setImmediate(cb);
      },
    });
    assert.ok("pumpTo" in body, "the upgraded (raw) way");
    await body.pumpTo(out, look);
    return Buffer.concat(chunks);
  };
  let scratch: string;

  before(async () => {
    endpoint = await NodeEndpoint.listen({
      node: fakeNode,
      secret,
      log: pino({ level: "silent" }),
      host: "127.0.0.1",
      port: 0,
    });
    scratch = join("/tmp", `ums-send-test-${process.pid}`);
    await mkdir(scratch, { recursive: true });
  });
  after(async () => {
    await endpoint.close();
  });

  it("brings the send's bytes whole, with its parent, held back by a slow receiver", async () => {
    const file = join(scratch, "stream.bin");
    const bytes = Buffer.concat([Buffer.alloc(3 << 20, 1), Buffer.from("end")]);
    await writeFile(file, bytes);
    sendScript = `cat ${file}`;
    const got = await peersAt(endpoint.port).send("n2", "u1", "cp-2", ["cp-1"]);
    assert.equal(got.parent, "cp-1");
    assert.deepEqual(sent, ["u1", "cp-2", ["cp-1"]]);
    assert.ok((await drain(got.body)).equals(bytes));
  });

  it("a send that fails part way fails the receive (a reset; and without its end command in any case)", async () => {
    // A valid stream's first 2.5 MB, then the sender fails: its node resets the connection. A reset
    // can reach the receiver as a plain end (the kernel reports a connection's error once), so what
    // says the stream is whole is its end command, which the receiver checks.
    const file = join(scratch, "partial.bin");
    const whole = stream([
      { cmd: 1, attrs: pathAttr("cp-2") },
      { cmd: 15, attrs: Buffer.alloc(3 << 20, 9) },
      { cmd: 21 },
    ]);
    await writeFile(file, whole);
    for (let i = 0; i < 5; i++) {
      sendScript = `head -c 2500000 ${file}; exit 3`;
      const got = await peersAt(endpoint.port).send("n2", "u1", "cp-2", []);
      assert.equal(got.parent, null);
      const checker = new StreamChecker("cp-2", false, true);
      await assert.rejects(
        drain(got.body, (b) => checker.look(b)).then(() => checker.end()),
        /ECONNRESET|closed before its end|cut short/,
      );
    }
    // The same stream whole passes the same checks.
    sendScript = `cat ${file}`;
    const checker = new StreamChecker("cp-2", false, true);
    const got = await peersAt(endpoint.port).send("n2", "u1", "cp-2", []);
    assert.ok((await drain(got.body, (b) => checker.look(b))).equals(whole));
    checker.end();
  });

  it("a checkpoint the node does not have is its error; no secret or bad arguments are refused", async () => {
    await assert.rejects(peersAt(endpoint.port).send("n2", "u1", "absent", []), UnitUnavailableError);
    const raw = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request({
          host: "127.0.0.1",
          port: endpoint.port,
          path: "/node/v1/send",
          headers: { connection: "Upgrade", upgrade: "ums-node-send", ...headers },
        });
        req.once("response", (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.once("upgrade", (_res, socket) => {
          socket.destroy();
          reject(new Error("upgraded"));
        });
        req.once("error", reject);
        req.end();
      });
    assert.equal(await raw({ authorization: `Bearer ${"t".repeat(40)}`, "x-ums-args": "W10" }), 401);
    assert.equal(await raw({ authorization: `Bearer ${secret}`, "x-ums-args": "not json" }), 400);
  });

  it("a node from before the upgraded send (404) is asked the framed way", async () => {
    const old: Server = createServer((req, res) => {
      assert.equal(req.method, "POST");
      res.writeHead(200, { "x-ums-parent": "" });
      res.end("framed bytes");
    });
    old.on("upgrade", (_req, socket) => {
      const body = JSON.stringify({ error: { kind: "Error", message: "no splice at /node/v1/send", fields: {} } });
      socket.end(`HTTP/1.1 404 Not Found\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
    });
    await new Promise<void>((r) => old.listen(0, "127.0.0.1", () => r()));
    try {
      const got = await peersAt((old.address() as { port: number }).port).send("n2", "u1", "cp-2", []);
      assert.ok(!("pumpTo" in got.body), "the framed way");
      const chunks: Buffer[] = [];
      for await (const c of got.body as AsyncIterable<Buffer>) chunks.push(c);
      assert.equal(Buffer.concat(chunks).toString(), "framed bytes");
    } finally {
      await new Promise((r) => old.close(r));
    }
  });

  describe("into btrfs receive (the test pool)", { skip: !root && "needs root" }, () => {
    let pool: { dir: string; remove(): Promise<void> } | undefined;
    let stream: Buffer;
    let file: string;
    let tree: string[];
    const cp = "cp-raw-1";
    const P = () => (pool as { dir: string }).dir;

    before(async () => {
      pool = await poolScratch("send");
      const live = join(P(), "live");
      await makeSubvolume(live);
      randomFile(join(live, "random.bin"), 3 << 20);
      await writeFile(join(live, "text.txt"), "compressible ".repeat(100_000));
      await mkdir(join(P(), "src"));
      await snapshot(live, join(P(), "src", cp), { readonly: true });
      tree = await describeTree(join(P(), "src", cp));
      file = join(P(), "stream.bin");
      const child = sendSnapshot(join(P(), "src", cp));
      const chunks: Buffer[] = [];
      // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe"
      for await (const c of child.proc.stdout!) chunks.push(c as Buffer);
      await child.exit;
      stream = Buffer.concat(chunks);
      await writeFile(file, stream);
    });
    after(async () => {
      await pool?.remove();
    });

    const receive = async (dest: string, script: string) => {
      sendScript = script;
      await mkdir(join(P(), dest), { recursive: true });
      const got = await peersAt(endpoint.port).send("n2", "u1", cp, []);
      return receiveSnapshot({ destDir: join(P(), dest), checkpointId: cp, incremental: false, body: got.body });
    };

    it("receives a whole stream into the same tree", async () => {
      assert.equal(await receive("whole", `cat ${file}`), stream.length);
      assert.deepEqual(await describeTree(join(P(), "whole", cp)), tree);
    });

    it("attack: a stream ended cleanly before its end command leaves nothing (no partial checkpoint taken for whole)", async () => {
      const offsets = commandOffsets(stream);
      const lastCommand = offsets.at(-1) as number;
      assert.equal(stream.readUInt16LE(lastCommand + 4), 21, "the stream ends with its end command");
      // btrfs receive -e refuses it too ("unexpected EOF"); the stream's own check does not rest on that.
      await assert.rejects(receive("cut", `head -c ${lastCommand} ${file}`), /cut short|unexpected EOF/);
      assert.deepEqual(await readdirSafe(join(P(), "cut")), []);
      await assert.rejects(receive("failed", `head -c ${lastCommand} ${file}; exit 1`));
      assert.deepEqual(await readdirSafe(join(P(), "failed")), []);
    });

    it("attack: a stream that makes another subvolume is refused before receive makes it", async () => {
      const other = Buffer.from(stream);
      const at = other.indexOf(Buffer.from(cp));
      other.write("cp-raw-2", at);
      await writeFile(join(P(), "other.bin"), other);
      await assert.rejects(receive("other", `cat ${join(P(), "other.bin")}`), /makes subvolume/);
      assert.deepEqual(await readdirSafe(join(P(), "other")), []);
    });
  });
});

function readdirSafe(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => []);
}
