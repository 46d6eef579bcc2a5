import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PARTIAL, parseResponseHead, type ResponseHead } from "./head.js";
import { BadResponse, ResponseBody } from "./response-body.js";

function head(text: string): ResponseHead {
  const h = parseResponseHead(Buffer.from(`${text}\r\n\r\n`, "latin1"), 16 * 1024);
  assert.notEqual(h, PARTIAL);
  return h as ResponseHead;
}

/** Feeds `bytes` in pieces of `step`; how many the body took, and whether it ended. */
function feed(body: ResponseBody, bytes: string, step: number): { taken: number; done: boolean } {
  const all = Buffer.from(bytes, "latin1");
  let taken = 0;
  for (let i = 0; i < all.length && !body.done; i += step) taken += body.take(all.subarray(i, i + step));
  return { taken, done: body.done };
}

describe("http/wire/response-body (RFC 9112 §6.3)", () => {
  it("has no body after HEAD, for 204 and 304, and with a Content-Length of 0", () => {
    for (const [method, text] of [
      ["HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 10"],
      ["GET", "HTTP/1.1 204 No Content"],
      ["GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10"],
      ["GET", "HTTP/1.1 200 OK\r\nContent-Length: 0"],
    ] as const) {
      const body = ResponseBody.of(method, head(text));
      assert.equal(body.kind, "none", text);
      assert.equal(body.done, true);
      assert.equal(body.take(Buffer.from("xyz")), 0, "bytes after it are not its");
    }
  });

  it("ends a Content-Length body at its length, however it is split, and takes nothing past it", () => {
    for (const step of [1, 3, 100]) {
      const body = ResponseBody.of("GET", head("HTTP/1.1 200 OK\r\nContent-Length: 11"));
      assert.equal(body.kind, "length");
      assert.deepEqual(feed(body, "hello worldHTTP/1.1 200 OK", step), { taken: 11, done: true }, `step ${step}`);
    }
  });

  it("ends a chunked body after its last chunk and trailers; other codings are refused", () => {
    const chunked = "5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n";
    for (const te of ["chunked", "Chunked"]) {
      const body = ResponseBody.of("GET", head(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${te}`));
      assert.equal(body.kind, "chunked");
      assert.deepEqual(feed(body, `${chunked}next`, 4), { taken: chunked.length, done: true });
    }
    for (const te of ["gzip, chunked", "gzip"]) {
      assert.throws(() => ResponseBody.of("GET", head(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${te}`)), BadResponse, te);
    }
    const broken = ResponseBody.of("GET", head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"));
    assert.throws(() => broken.take(Buffer.from("zz\r\n")), BadResponse, "a chunk size that is no hex number");
  });

  it("reads to the connection's end without a length; a Content-Length that is no number is refused", () => {
    const body = ResponseBody.of("GET", head("HTTP/1.1 200 OK"));
    assert.equal(body.kind, "close");
    assert.equal(body.take(Buffer.alloc(5000)), 5000);
    assert.equal(body.done, false, "only the connection's end ends it");
    for (const cl of ["Content-Length: abc", "Content-Length: 5\r\nContent-Length: 6", "Content-Length: -1"]) {
      assert.throws(() => ResponseBody.of("GET", head(`HTTP/1.1 200 OK\r\n${cl}`)), BadResponse, cl);
    }
  });
});
