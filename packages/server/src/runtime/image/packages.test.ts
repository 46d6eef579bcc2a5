import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { bootstrapPercent } from "./bootstrap.js";
import { toNamespacedCapability } from "./caps.js";
import { debianSources, defaultImageName, IMAGE_PACKAGES, imageNameProblem } from "./packages.js";

describe("image packages", () => {
  it("the test variant is a small subset of what the full one has", () => {
    assert.ok(IMAGE_PACKAGES.test.length < IMAGE_PACKAGES.full.length);
    for (const p of IMAGE_PACKAGES.test) assert.ok(IMAGE_PACKAGES.full.includes(p), p);
    for (const p of ["sudo", "python3", "ca-certificates"]) assert.ok(IMAGE_PACKAGES.test.includes(p), p);
    assert.equal(defaultImageName("full"), "base");
    assert.equal(defaultImageName("test"), "test");
  });

  it("sources: bookworm, updates and security, from env mirrors", () => {
    assert.deepEqual(debianSources({}), [
      "deb http://deb.debian.org/debian bookworm main",
      "deb http://deb.debian.org/debian bookworm-updates main",
      "deb http://deb.debian.org/debian-security bookworm-security main",
    ]);
    assert.deepEqual(
      debianSources({ UMS_DEBIAN_MIRROR: "http://mirror.local/debian/", UMS_DEBIAN_SECURITY_MIRROR: "none" }),
      ["deb http://mirror.local/debian bookworm main", "deb http://mirror.local/debian bookworm-updates main"],
    );
    assert.throws(() => debianSources({ UMS_DEBIAN_MIRROR: "mirror.local" }), /not a URL/);
  });

  it("image names are safe directory names", () => {
    assert.equal(imageNameProblem("base"), undefined);
    assert.equal(imageNameProblem("test-2.x_y"), undefined);
    for (const bad of ["", ".base", "../x", "a/b", "Base", "x".repeat(64)]) assert.ok(imageNameProblem(bad), bad);
  });

  it("mmdebstrap milestones give a rising percentage", () => {
    const lines = [
      "I: running apt-get update...",
      "I: downloading packages with apt...",
      "I: extracting archives...",
      "I: installing essential packages...",
      "I: installing remaining packages inside the chroot...",
      "I: cleaning package lists and apt cache...",
      "I: success in 41.3885 seconds",
    ];
    const percents = lines.map(bootstrapPercent);
    assert.ok(percents.every((p) => typeof p === "number"));
    assert.deepEqual(
      [...percents].sort((a, b) => (a ?? 0) - (b ?? 0)),
      percents,
    );
    assert.equal(bootstrapPercent("I: automatically chosen mode: root"), undefined);
  });
});

describe("toNamespacedCapability", () => {
  it("turns ping's v2 cap_net_raw=ep into a v3 capability rooted at the uid shift", () => {
    // getfattr of /usr/bin/ping in a bookworm bootstrap
    const v2 = "0100000200200000000000000000000000000000";
    assert.equal(
      toNamespacedCapability(v2, 100000),
      ["01000003", "00200000", "00000000", "00000000", "00000000", "a0860100"].join(""),
    );
  });
  it("re-roots a v3 capability and widens a v1 one", () => {
    const v3 = `00000003${"01000000".repeat(4)}00000000`;
    assert.equal(toNamespacedCapability(v3, 5), `00000003${"01000000".repeat(4)}05000000`);
    const v1 = "010000010020000000000000";
    assert.equal(
      toNamespacedCapability(v1, 1),
      ["01000003", "00200000", "00000000", "00000000", "00000000", "01000000"].join(""),
    );
    assert.throws(() => toNamespacedCapability("00000009", 1), /too short/);
    assert.throws(() => toNamespacedCapability(`00000009${"00".repeat(16)}`, 1), /unknown capability/);
  });
});
