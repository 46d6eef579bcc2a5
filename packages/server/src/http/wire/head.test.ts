import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { contentLength, HeadError, listsToken, PARTIAL, parseRequestHead, parseResponseHead } from "./head.js";

const req = (s: string) => parseRequestHead(Buffer.from(s, "latin1"), 16 * 1024);
const res = (s: string) => parseResponseHead(Buffer.from(s, "latin1"), 16 * 1024);

describe("http/wire/head (RFC 9112 §2-§5, strict)", () => {
  it("reads a request head: method, target, version, fields as sent, its length", () => {
    const text = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Two:  spaced value \t\r\nX-Obs: caf\xe9\r\n\r\nbody";
    const h = req(text);
    assert.notEqual(h, PARTIAL);
    if (h === PARTIAL) return;
    assert.equal(h.method, "GET");
    assert.equal(h.target, "/a?b=1");
    assert.equal(h.minorVersion, 1);
    assert.deepEqual(h.rawHeaders, ["Host", "x", "X-Two", "spaced value", "X-Obs", "caf\xe9"]);
    assert.equal(h.length, text.length - 4);
  });

  it("waits for the rest of a head; refuses one larger than the limit", () => {
    assert.equal(req("GET / HTTP/1.1\r\nHost: x\r\n"), PARTIAL);
    assert.equal(req("GET / HTTP/1.1\r\nHost: x\r\n\r"), PARTIAL);
    assert.throws(() => parseRequestHead(Buffer.from(`GET / HTTP/1.1\r\nX: ${"a".repeat(100)}`), 64), HeadError);
    assert.throws(
      () => parseRequestHead(Buffer.from(`GET / HTTP/1.1\r\nX: ${"a".repeat(100)}\r\n\r\n`), 64),
      HeadError,
    );
  });

  it("refuses what could be read two ways (§2.2, §5.1, §5.2)", () => {
    for (const bad of [
      "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", // whitespace before the colon
      "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", // obs-fold
      "GET / HTTP/1.1\r\nX-A: 1\nHost: x\r\n\r\n", // a bare LF inside the head
      "GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n", // a bare CR
      "GET / HTTP/1.1\r\nX-A: a\x00b\r\n\r\n", // NUL
      "GET  / HTTP/1.1\r\n\r\n", // two spaces
      "GET / HTTP/2.0\r\n\r\n",
      "GET /a b HTTP/1.1\r\n\r\n",
      "\r\nGET / HTTP/1.1\r\n\r\n", // an empty line before the request line
      "G(T / HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\n: empty-name\r\n\r\n",
    ]) {
      assert.throws(() => req(bad), HeadError, JSON.stringify(bad));
    }
  });

  it("reads a status line with or without a reason", () => {
    const a = res("HTTP/1.1 204 No Content\r\n\r\n");
    assert.ok(a !== PARTIAL && a.status === 204 && a.reason === "No Content");
    const b = res("HTTP/1.0 200\r\nContent-Length: 0\r\n\r\n");
    assert.ok(b !== PARTIAL && b.status === 200 && b.minorVersion === 0 && b.reason === "");
    assert.throws(() => res("HTTP/1.1 20 OK\r\n\r\n"), HeadError);
    assert.throws(() => res("HTTP/1.1 099 x\r\n\r\n"), HeadError);
    assert.throws(() => res("ICY 200 OK\r\n\r\n"), HeadError);
  });

  it("Content-Length: digits, the same value when repeated (RFC 9110 §8.6)", () => {
    assert.equal(contentLength(["Host", "x"]), undefined);
    assert.equal(contentLength(["Content-Length", "42"]), 42);
    assert.equal(contentLength(["content-length", "7, 7", "Content-Length", "7"]), 7);
    for (const bad of [["5", "6"], ["-1"], ["0x10"], ["1e3"], [""], ["1 2"], ["99999999999999999"]]) {
      assert.throws(() => contentLength(bad.flatMap((v) => ["Content-Length", v])), HeadError, bad.join("|"));
    }
  });

  it("tokens of list fields, case-insensitive", () => {
    assert.ok(listsToken(["keep-alive, Close"], "close"));
    assert.ok(!listsToken(["closed"], "close"));
  });
});
