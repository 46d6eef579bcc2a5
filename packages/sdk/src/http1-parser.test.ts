import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type ResponseHead, ResponseParser } from "./http1-parser.js";

interface Parsed {
  head?: ResponseHead;
  data: Buffer[];
  ended: boolean;
}

/** Feeds `raw` cut at `cuts` (offsets), then closes the connection. */
function parse(raw: Buffer, cuts: number[] = [], close = true): Parsed {
  const out: Parsed = { data: [], ended: false };
  const p = new ResponseParser({
    head: (h) => {
      out.head = h;
    },
    data: (b) => out.data.push(Buffer.from(b)),
    end: () => {
      out.ended = true;
    },
  });
  let at = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    p.push(raw.subarray(at, cut));
    at = cut;
  }
  p.push(raw.subarray(at));
  if (close) p.close();
  return out;
}

const chunked = (chunks: Buffer[]) =>
  Buffer.concat([
    Buffer.from("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"),
    ...chunks.map((c) => Buffer.concat([Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from("\r\n")])),
    Buffer.from("0\r\n\r\n"),
  ]);

describe("HTTP/1.1 response parser (exec framing)", () => {
  it("gives each chunk whole and in order, however the bytes are cut (fuzzed)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 300 }), { maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 30 }),
        (chunks, cutSeeds) => {
          const raw = chunked(chunks.map((c) => Buffer.from(c)));
          const out = parse(
            raw,
            cutSeeds.map((n) => n % (raw.length + 1)),
          );
          assert.equal(out.head?.status, 200);
          assert.equal(out.head?.headers["content-type"], "application/octet-stream");
          assert.deepEqual(
            out.data,
            chunks.map((c) => Buffer.from(c)),
          );
          assert.ok(out.ended);
        },
      ),
    );
  });

  it("reads a content-length body (an error answer) and skips a 100 Continue head", () => {
    const body = '{"error":"no unit","code":"UMS_UNIT_NOT_FOUND"}';
    const raw = Buffer.from(
      `HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: ${body.length}\r\nX-A: 1\r\nx-a: 2\r\n\r\n${body}`,
    );
    const out = parse(raw, [5, 30, 80]);
    assert.equal(out.head?.status, 404);
    assert.equal(out.head?.statusText, "Not Found");
    assert.equal(out.head?.headers["x-a"], "1, 2");
    assert.equal(Buffer.concat(out.data).toString(), body);
    assert.ok(out.ended);
  });

  it("ends a body without length or chunking at the close of the connection", () => {
    const out = parse(Buffer.from("HTTP/1.1 200 OK\r\n\r\nabc"));
    assert.equal(Buffer.concat(out.data).toString(), "abc");
    assert.ok(out.ended);
  });

  it("rejects what is not HTTP and a response cut short", () => {
    assert.throws(() => parse(Buffer.from("SSH-2.0-OpenSSH\r\n\r\n")), /status line/);
    assert.throws(() => parse(chunked([Buffer.from("abc")]).subarray(0, -7)), /closed in the middle/);
    assert.throws(
      () => parse(Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")),
      /bad chunk size/,
    );
    assert.throws(
      () => parse(Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY")),
      /not followed by CRLF/,
    );
  });

  it("never throws anything but an Error on arbitrary bytes after a valid head (fuzzed)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.array(fc.nat(), { maxLength: 5 }), (junk, cuts) => {
        const raw = Buffer.concat([Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), junk]);
        try {
          parse(
            raw,
            cuts.map((n) => n % (raw.length + 1)),
          );
        } catch (err) {
          assert.ok(err instanceof Error);
        }
      }),
    );
  });
});
