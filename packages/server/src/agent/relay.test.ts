import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { relayPair } from "./relay.js";

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
