import assert from "node:assert/strict";
import { test } from "node:test";
import { joinHostPort, parseTunnelOpen, tunnelHost } from "./tunnel.js";

test("tunnelHost takes names, IPv4 and IPv6 literals, and refuses anything else", () => {
  for (const [given, want] of [
    ["localhost", "localhost"],
    ["db.internal.", "db.internal"],
    ["a-b.example.com", "a-b.example.com"],
    ["10.0.0.1", "10.0.0.1"],
    ["::1", "::1"],
    ["[fdf::1]", "fdf::1"],
    ["::ffff:127.0.0.1", "::ffff:127.0.0.1"],
  ] as const) {
    assert.equal(tunnelHost(given), want, given);
  }
  for (const bad of [
    "",
    ".",
    "bad host",
    "-a.example",
    "a-.example",
    "a..b",
    "300.1.1.1",
    "1.2.3",
    "x/y",
    "[::1",
    "fe80::1%eth0",
    `${"a".repeat(64)}.example`,
    `${"a.".repeat(127)}a`,
  ]) {
    assert.equal(tunnelHost(bad), null, bad);
  }
});

test("parseTunnelOpen defaults the host to localhost and names every bad field", () => {
  assert.deepEqual(parseTunnelOpen('{"port": 8080}'), { ok: true, value: { host: "localhost", port: 8080 } });
  assert.deepEqual(parseTunnelOpen('{"host": "", "port": 1}'), { ok: true, value: { host: "localhost", port: 1 } });
  assert.deepEqual(parseTunnelOpen('{"host": "x y", "port": 0}'), {
    ok: false,
    errors: ["host: must be a host name or an IP address", "port: must be an integer from 1 to 65535"],
  });
  assert.deepEqual(parseTunnelOpen('{"host": "h"}'), { ok: false, errors: ["port: is required"] });
  assert.deepEqual(parseTunnelOpen('{"port": 1.5}'), {
    ok: false,
    errors: ["port: must be an integer from 1 to 65535"],
  });
  assert.equal(parseTunnelOpen("nope").ok, false);
  assert.equal(parseTunnelOpen("null").ok, false);
  assert.equal(parseTunnelOpen("[]").ok, false);
});

test("joinHostPort brackets IPv6", () => {
  assert.equal(joinHostPort("::1", 80), "[::1]:80");
  assert.equal(joinHostPort("127.0.0.1", 80), "127.0.0.1:80");
});
