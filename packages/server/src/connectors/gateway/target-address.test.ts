import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkAddress, checkHost, parseRanges, rangeLabel } from "./target-address.js";

describe("gateway target addresses (issue #19 finding 7): global unicast only", () => {
  it("refuses every address that is not global unicast, in every notation", () => {
    const refused: [string, string][] = [
      ["127.0.0.1", "loopback"],
      ["127.255.255.254", "loopback"],
      ["0.0.0.0", "unspecified"],
      ["0.1.2.3", "unspecified"],
      ["10.209.0.1", "private"],
      ["172.16.0.1", "private"],
      ["172.31.255.1", "private"],
      ["192.168.1.1", "private"],
      ["169.254.169.254", "linkLocal"],
      ["100.64.0.1", "carrierGradeNat"],
      ["224.0.0.1", "multicast"],
      ["255.255.255.255", "broadcast"],
      ["240.0.0.1", "reserved"],
      ["192.0.0.1", "reserved"],
      ["198.18.0.1", "reserved"],
      ["203.0.113.5", "reserved"],
      ["::1", "loopback"],
      ["::", "unspecified"],
      ["fd00::1", "uniqueLocal"],
      ["fc00::1", "uniqueLocal"],
      ["fe80::1", "linkLocal"],
      ["fe80::1%eth0", "linkLocal"],
      ["fec0::1", "deprecatedSiteLocal"],
      ["ff02::1", "multicast"],
      ["2001:db8::1", "reserved"],
      // IPv4-mapped IPv6 (RFC 4291 §2.5.5.2) is judged as the IPv4 address it carries.
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"],
      ["0:0:0:0:0:ffff:7f00:0001", "loopback"],
      ["::FFFF:169.254.169.254", "linkLocal"],
      ["::ffff:a9fe:a9fe", "linkLocal"],
      ["::ffff:10.0.0.1", "private"],
      ["::ffff:c0a8:101", "private"],
      ["::ffff:100.64.0.1", "carrierGradeNat"],
      ["::ffff:0.0.0.0", "unspecified"],
      // IPv4-compatible (deprecated, RFC 4291 §2.5.5.1): outside 2000::/3.
      ["::127.0.0.1", "notGlobal"],
      ["::7f00:1", "notGlobal"],
      ["::8.8.8.8", "notGlobal"],
      // Translation and tunnel prefixes: refused whatever they embed.
      ["64:ff9b::127.0.0.1", "rfc6052"],
      ["64:ff9b::8.8.8.8", "rfc6052"],
      ["64:ff9b:1::a00:1", "rfc6052"],
      ["::ffff:0:7f00:1", "rfc6145"],
      ["2002:7f00:1::", "6to4"],
      ["2001::1", "teredo"],
      ["100::1", "discard"],
    ];
    for (const [ip, range] of refused) {
      assert.equal(checkAddress(ip)?.refused, range, ip);
    }
  });

  it("takes global unicast addresses, and an IPv4-mapped one as its IPv4 address", () => {
    for (const ip of ["8.8.8.8", "93.184.216.34", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "2a00:1450::1"]) {
      assert.equal(checkAddress(ip)?.refused, undefined, ip);
    }
    assert.deepEqual(checkAddress("::ffff:5db8:d822"), { address: "93.184.216.34", family: 4, refused: undefined });
    assert.equal(checkAddress("not an address"), undefined);
  });

  it("allowed ranges (tests) are reachable, and only those", () => {
    const allowed = parseRanges(["203.0.113.0/24"], "test");
    assert.equal(checkAddress("203.0.113.9", allowed)?.refused, undefined);
    assert.equal(checkAddress("::ffff:203.0.113.9", allowed)?.refused, undefined);
    assert.equal(checkAddress("198.51.100.1", allowed)?.refused, "reserved");
    assert.equal(checkAddress("127.0.0.1", allowed)?.refused, "loopback");
    assert.throws(() => parseRanges(["10.0.0.0/33"], "cfg"), /cfg: '10.0.0.0\/33' is not a CIDR/);
    assert.throws(() => parseRanges([7], "cfg"), /not a CIDR/);
  });

  it("hosts: address literals in any IPv4 notation, localhost names refused without a lookup, other names left to resolve", () => {
    const addr = (h: string) => {
      const v = checkHost(h);
      return v.kind === "address" ? [v.checked.address, v.checked.refused] : v.kind;
    };
    // What WHATWG URL parsing leaves, and what a resolver's inet_aton would take if it were not parsed.
    for (const h of [
      "127.0.0.1",
      "127.1",
      "0x7f.1",
      "0x7f000001",
      "2130706433",
      "0177.0.0.1",
      "127.0.0.1.",
      "127.1..",
    ]) {
      assert.deepEqual(addr(h), ["127.0.0.1", "loopback"], h);
    }
    assert.deepEqual(addr("[::ffff:7f00:1]"), ["127.0.0.1", "loopback"]);
    assert.deepEqual(addr("[::1]"), ["::1", "loopback"]);
    assert.deepEqual(addr("[2606:4700::1111]"), ["2606:4700::1111", undefined]);
    assert.deepEqual(addr("8.8.8.8"), ["8.8.8.8", undefined]);
    for (const h of ["localhost", "LOCALHOST.", "localhost..", "api.localhost", "Api.LocalHost.", "a.b.localhost"]) {
      const v = checkHost(h);
      assert.equal(v.kind, "refused", h);
      assert.match(v.kind === "refused" ? v.reason : "", /localhost, RFC 6761/);
    }
    assert.equal(checkHost(".").kind, "refused");
    assert.deepEqual(checkHost("api.example.com"), { kind: "name", name: "api.example.com" });
    assert.deepEqual(checkHost("api.example.com."), { kind: "name", name: "api.example.com." });
    assert.deepEqual(checkHost("localhost.example.com"), { kind: "name", name: "localhost.example.com" });
  });

  it("names ranges readably", () => {
    assert.equal(rangeLabel("linkLocal"), "link-local");
    assert.equal(rangeLabel("notGlobal"), "non-global (outside 2000::/3)");
    assert.equal(rangeLabel("as112"), "as112");
  });
});
