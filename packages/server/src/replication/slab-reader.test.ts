import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SlabReader } from "./slab-reader.js";

const KiB = 1024;

/** `cat FILE` writing into the reader; resolves with its exit code. */
function catInto(reader: SlabReader, file: string): Promise<number | null> {
  const child = spawn("cat", [file], { stdio: ["ignore", reader.childEnd, "ignore"] });
  reader.childEnd.destroy();
  return new Promise((resolve) => child.on("close", (code) => resolve(code)));
}

describe("SlabReader", () => {
  let dir: string;
  let file: string;
  let data: Buffer;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ums-slab-"));
    file = join(dir, "data");
    data = randomBytes(5 * 1024 * KiB + 777); // not a multiple of a slab or a part
    await writeFile(file, data);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("yields the child's bytes in order, in slabs that never straddle a part boundary", async () => {
    const partSize = 700 * KiB + 5; // parts of 256 + 256 + 188 KiB + 5 bytes of slabs
    const reader = await SlabReader.open({ partSize, maxSlabs: 6, slabSize: 256 * KiB });
    const exit = catInto(reader, file);
    const got: Buffer[] = [];
    let offset = 0;
    for await (const slab of reader) {
      assert.ok(slab.length > 0 && slab.length <= 256 * KiB);
      const inPart = offset % partSize;
      assert.ok(inPart + slab.length <= partSize, `a slab at ${offset} crosses the part boundary`);
      // Every slab but the stream's last is full: the slab size, or what is left of the part.
      if (offset + slab.length < data.length) assert.equal(slab.length, Math.min(256 * KiB, partSize - inPart));
      got.push(Buffer.from(slab));
      offset += slab.length;
      reader.release([slab]);
    }
    assert.equal(await exit, 0);
    assert.ok(Buffer.concat(got).equals(data));
  });

  it("stops reading while maxSlabs slabs are out and reuses those it gets back, without mixing bytes", async () => {
    const reader = await SlabReader.open({ partSize: 64 * KiB, maxSlabs: 3, slabSize: 64 * KiB });
    const exit = catInto(reader, file);
    const it = reader[Symbol.asyncIterator]();
    const take = async () => {
      const r = await it.next();
      return r.done ? undefined : r.value;
    };
    const a = await take();
    const b = await take();
    assert.ok(a && b);
    const copies = [Buffer.from(a), Buffer.from(b)];
    // Two held, the third being filled has no successor: reading stops, nothing more comes.
    const third = take();
    const raced = await Promise.race([
      third.then(() => "more"),
      new Promise((r) => setTimeout(() => r("stalled"), 300)),
    ]);
    assert.equal(raced, "stalled", "the reader went on with every slab out");
    assert.ok(a.equals(copies[0] as Buffer) && b.equals(copies[1] as Buffer), "held bytes were overwritten");
    const buffers = new Set<ArrayBufferLike>([a.buffer, b.buffer]);
    reader.release([a]);
    let slab = await third;
    reader.release([b]);
    while (slab) {
      buffers.add(slab.buffer);
      copies.push(Buffer.from(slab));
      reader.release([slab]);
      slab = await take();
    }
    assert.equal(await exit, 0);
    assert.equal(buffers.size, 3);
    assert.ok(Buffer.concat(copies).equals(data));
  });

  it("fails its iteration when closed before the child's end", async () => {
    const reader = await SlabReader.open({ partSize: 64 * KiB, maxSlabs: 4, slabSize: 64 * KiB });
    const child = spawn("sh", ["-c", 'while :; do cat "$1"; done', "sh", file], {
      stdio: ["ignore", reader.childEnd, "ignore"],
    });
    reader.childEnd.destroy();
    const closed = new Promise((resolve) => child.on("close", resolve));
    try {
      await assert.rejects(
        (async () => {
          let n = 0;
          for await (const slab of reader) {
            reader.release([slab]);
            if (++n === 3) reader.close();
          }
        })(),
        /closed before its end/,
      );
    } finally {
      child.kill("SIGKILL");
      await closed;
    }
  });
});
