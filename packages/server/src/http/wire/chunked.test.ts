import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ChunkedScanner } from "./chunked.js";
import { HeadError } from "./head.js";

/** Feeds `body` (then `after`) to a scanner in pieces of `step` bytes; returns how many bytes it took. */
function scan(body: string, after = "", step = 1): { taken: number; done: boolean } {
  const s = new ChunkedScanner();
  const all = Buffer.from(body + after, "latin1");
  let taken = 0;
  for (let i = 0; i < all.length && !s.done; i += step) {
    const piece = all.subarray(i, Math.min(i + step, all.length));
    taken += s.scan(piece);
  }
  return { taken, done: s.done };
}

describe("http/wire/chunked (RFC 9112 §7.1)", () => {
  const body = "5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\n";

  it("finds the end of a chunked body however it is split, and nothing past it", () => {
    for (const step of [1, 2, 7, 1000]) {
      assert.deepEqual(
        scan(body, "GET /next HTTP/1.1\r\n\r\n", step),
        { taken: body.length, done: true },
        `step ${step}`,
      );
    }
    assert.deepEqual(scan("0\r\n\r\n", "rest"), { taken: 5, done: true });
  });

  it("is not done before the final empty line", () => {
    assert.deepEqual(scan("5\r\nhello\r\n0\r\n"), { taken: 13, done: false });
    assert.deepEqual(scan("5\r\nhel"), { taken: 6, done: false });
  });

  it("refuses malformed framing", () => {
    for (const bad of [
      "5\r\nhello!\r\n", // data longer than its size
      "5\nhello\r\n", // LF alone
      "x\r\n", // not hex
      "\r\n", // no size
      "-5\r\nhello\r\n",
      "10000000000000000\r\n", // 17 digits
      "5;a\x00b\r\nhello\r\n",
      "0\r\nBad\x01Trailer\r\n\r\n",
      "0\r\n\rX",
    ]) {
      assert.throws(() => scan(bad), HeadError, JSON.stringify(bad));
    }
  });
});
