import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, linkSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { extract } from "tar-stream";
import { seededRandom } from "../../../soak/rng.js";
import { suiteTempDir } from "../../../testing/temp-dir.js";
import { TarEvent, TarFormatError, TarParser } from "./tar-parser.js";
import { makeTar } from "./test-archives.js";

/** What a parser made of an archive: each entry's header fields and data, or its error's message. */
interface Parsed {
  entries: { header: Record<string, unknown>; data: string }[];
  error?: string;
}

const FIELDS = ["name", "size", "mode", "uid", "gid", "type", "linkname", "uname", "gname", "devmajor", "devminor"];

function fields(h: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of FIELDS) out[f] = h[f];
  out.mtime = (h.mtime as Date | undefined)?.getTime();
  out.pax = h.pax ?? null;
  return out;
}

/** tar-stream's reading, the reference. */
async function withTarStream(data: Buffer): Promise<Parsed> {
  const out: Parsed = { entries: [] };
  const ex = extract();
  try {
    ex.end(data);
    for await (const entry of ex) {
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(Buffer.from(c as Uint8Array));
      out.entries.push({
        header: fields(entry.header as unknown as Record<string, unknown>),
        data: Buffer.concat(chunks).toString("hex"),
      });
    }
  } catch (err) {
    out.error = (err as Error).message;
  }
  return out;
}

/** TarParser's, with the data pushed in pieces of the sizes `cut` gives. */
function withParser(data: Buffer, cut: () => number): Parsed {
  const out: Parsed = { entries: [] };
  const p = new TarParser();
  let current: { header: Record<string, unknown>; data: string } | undefined;
  let chunks: Buffer[] = [];
  try {
    for (let off = 0; off < data.length; ) {
      const n = Math.max(1, Math.min(cut(), data.length - off));
      p.push(data.subarray(off, off + n));
      off += n;
      for (let ev = p.next(); ev !== TarEvent.Need; ev = p.next()) {
        if (ev === TarEvent.Entry) {
          assert.equal(current, undefined, "an entry before the end of the one before");
          current = { header: fields(p.header as unknown as Record<string, unknown>), data: "" };
          chunks = [];
        } else if (ev === TarEvent.Data) {
          chunks.push(Buffer.from(p.chunk));
        } else {
          assert.ok(current, "an end without an entry");
          current.data = Buffer.concat(chunks).toString("hex");
          out.entries.push(current);
          current = undefined;
        }
      }
    }
    p.end();
  } catch (err) {
    assert.ok(err instanceof TarFormatError, `not a TarFormatError: ${(err as Error).stack}`);
    out.error = err.message;
  }
  return out;
}

/** Checks that TarParser reads `data` as tar-stream does, whole and in pieces of many sizes. */
async function sameAsTarStream(data: Buffer, what: string): Promise<Parsed> {
  const want = await withTarStream(data);
  const random = seededRandom(data.length);
  const cuts: [string, () => number][] = [
    ["whole", () => data.length],
    ["1 byte", () => 1],
    ["511 bytes", () => 511],
    ["random", () => 1 + Math.floor(random() * 1500)],
  ];
  for (const [how, cut] of cuts) assert.deepEqual(withParser(data, cut), want, `${what}, pushed ${how}`);
  return want;
}

describe("TarParser reads as tar-stream does", () => {
  const dir = suiteTempDir("ums-tar-parser-");

  /** A tree with long names, long link targets, hard links, empty and odd-sized files. */
  function tree(): string {
    const t = join(dir(), `tree-${Math.random().toString(36).slice(2)}`);
    const long = `${"d".repeat(90)}/${"e".repeat(90)}/${"f".repeat(90)}`;
    mkdirSync(join(t, long), { recursive: true });
    writeFileSync(join(t, long, `${"n".repeat(120)}.txt`), randomBytes(1000));
    for (const size of [0, 1, 511, 512, 513, 10_000]) writeFileSync(join(t, `file-${size}`), randomBytes(size));
    symlinkSync(`${"../".repeat(3)}${"t".repeat(150)}`, join(t, "long-link"));
    symlinkSync("file-1", join(t, "short-link"));
    linkSync(join(t, "file-513"), join(t, "hard-513"));
    execFileSync("mkfifo", [join(t, "fifo")]);
    writeFileSync(join(t, "big-uid"), "x");
    chownSync(join(t, "big-uid"), 3_000_000, 4_000_000); // past what 7 octal digits hold: base-256 (GNU)
    return t;
  }

  it("GNU, PAX and ustar archives of GNU tar, pushed in pieces of any size", async () => {
    const t = tree();
    for (const format of ["gnu", "pax", "oldgnu"]) {
      const data = execFileSync("tar", [`--format=${format}`, "-cf", "-", "-C", t, "."], { maxBuffer: 1 << 26 });
      const parsed = await sameAsTarStream(data, format);
      assert.equal(parsed.error, undefined, format);
      assert.ok(parsed.entries.length >= 15, format);
      assert.ok(
        parsed.entries.some((e) => String(e.header.name).endsWith(`${"n".repeat(120)}.txt`)),
        `${format}: the long name`,
      );
    }
    // ustar cannot store all of it; what it can store:
    const short = join(dir(), "short");
    mkdirSync(join(short, "a/b"), { recursive: true });
    writeFileSync(join(short, "a/b/c"), "ustar");
    symlinkSync("b/c", join(short, "a/l"));
    const ustar = execFileSync("tar", ["--format=ustar", "-cf", "-", "-C", short, "."]);
    assert.equal((await sameAsTarStream(ustar, "ustar")).error, undefined);
  });

  it("archives made by tar-stream, with PAX records", async () => {
    const data = await makeTar([
      { name: "./", type: "directory" },
      { name: "x".repeat(300), data: "long name" },
      { name: "with-pax", data: "p", pax: { "SCHILY.xattr.user.a": "b", mtime: "1700000000.5" } },
      { name: "l", type: "symlink", linkname: "y".repeat(200) },
      { name: "dev", type: "character-device", devmajor: 1, devminor: 3 },
      { name: "empty", data: "" },
    ]);
    const parsed = await sameAsTarStream(data, "tar-stream");
    assert.equal(parsed.error, undefined);
    assert.equal(parsed.entries.length, 6);
  });

  it("refuses broken data with tar-stream's messages", async () => {
    const t = tree();
    const good = execFileSync("tar", ["--format=pax", "-cf", "-", "-C", t, "."], { maxBuffer: 1 << 26 });
    const random = seededRandom(7);
    for (let i = 0; i < 40; i++) {
      const at = Math.floor(random() * good.length);
      const truncated = await sameAsTarStream(good.subarray(0, at), `truncated at ${at}`);
      if (at % 512 !== 0) assert.match(truncated.error ?? "", /Unexpected end of data/, `truncated at ${at}`);
      const corrupt = Buffer.from(good);
      corrupt[at] = (corrupt[at] ?? 0) ^ 0x55;
      await sameAsTarStream(corrupt, `a byte changed at ${at}`);
    }
    assert.match((await sameAsTarStream(randomBytes(4096), "garbage")).error ?? "", /Invalid tar header/);
    assert.equal((await sameAsTarStream(Buffer.alloc(0), "empty")).error, undefined);
    assert.match((await sameAsTarStream(Buffer.from("short"), "short")).error ?? "", /Unexpected end of data/);
    const v7 = execFileSync("tar", ["--format=v7", "-cf", "-", "-C", t, "file-1"]);
    assert.match((await sameAsTarStream(v7, "v7")).error ?? "", /unknown format/);
  });

  it("gives where each entry's data starts", () => {
    const t = tree();
    const data = execFileSync("tar", ["--format=pax", "-cf", "-", "-C", t, "."], { maxBuffer: 1 << 26 });
    const p = new TarParser();
    p.push(data);
    let checked = 0;
    for (let ev = p.next(); ev !== TarEvent.Need; ev = p.next()) {
      if (ev !== TarEvent.Data) continue;
      const start = p.header.byteOffset ?? -1;
      if (p.chunk.length === p.header.size) {
        assert.deepEqual(data.subarray(start, start + p.header.size), p.chunk, p.header.name);
        checked++;
      }
    }
    p.end();
    assert.ok(checked >= 7, `${checked} entries checked`);
  });
});
