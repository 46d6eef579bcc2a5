import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isPrivateAddress } from "./private-address.js";

describe("private addresses (user-given base URLs may not point there)", () => {
  it("classifies loopback, private, link-local, CGNAT, multicast and IPv6 local ranges", () => {
    for (const ip of [
      "127.0.0.1",
      "10.209.0.1",
      "172.16.0.1",
      "172.31.255.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "::1",
      "::",
      "fd00::1",
      "fe80::1",
      "::ffff:127.0.0.1",
    ]) {
      assert.equal(isPrivateAddress(ip), true, ip);
    }
    for (const ip of ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:db8::1", "::ffff:93.184.216.34"]) {
      assert.equal(isPrivateAddress(ip), false, ip);
    }
  });
});
