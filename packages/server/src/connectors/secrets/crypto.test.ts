import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { newState, stateHash } from "../oauth/state.js";
import { SecretBox } from "./crypto.js";
import { addKeyVersion, loadSecretBox, parseEnvKeys } from "./master-key.js";

describe("secrets at rest", () => {
  it("seals with AES-256-GCM bound to the connector id; tampering and another id fail", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ums-keys-"));
    try {
      const box = await loadSecretBox(dir, {});
      assert.equal((await stat(join(dir, "master.key"))).mode & 0o777, 0o600);
      const sealed = box.seal("s3cr3t-value", "conn_a");
      assert.ok(!sealed.includes("s3cr3t"));
      assert.match(sealed, /^v1\./);
      assert.equal(box.open(sealed, "conn_a"), "s3cr3t-value");
      assert.throws(
        () => box.open(sealed, "conn_b"),
        (e: Error) => !e.message.includes("s3cr3t"),
      );
      // A character inside the encoding (the last ones may hold padding bits that decode alike).
      const at = sealed.length - 8;
      const flipped = sealed.slice(0, at) + (sealed[at] === "A" ? "B" : "A") + sealed.slice(at + 1);
      assert.throws(() => box.open(flipped, "conn_a"));
      assert.notEqual(box.seal("x", "c"), box.seal("x", "c"), "fresh nonce each time");
      // Rotation: a new version seals, the old one still opens.
      const box2 = await addKeyVersion(dir, {});
      assert.equal(box2.currentVersion, 2);
      assert.equal(box2.open(sealed, "conn_a"), "s3cr3t-value");
      assert.match(box2.seal("x", "c"), /^v2\./);
      const ring = JSON.parse(await readFile(join(dir, "master.key"), "utf8"));
      assert.deepEqual(Object.keys(ring.keys), ["1", "2"]);
      assert.equal((await stat(join(dir, "master.key"))).mode & 0o777, 0o600);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("UMS_MASTER_KEY takes versions; the highest seals", () => {
    const k1 = Buffer.alloc(32, 1).toString("base64");
    const k2 = Buffer.alloc(32, 2).toString("base64");
    assert.equal(parseEnvKeys(k1).current, 1);
    assert.equal(parseEnvKeys(`1:${k1},3:${k2}`).current, 3);
    assert.throws(() => parseEnvKeys("short"), /32 bytes/);
    const keys = new Map([[1, Buffer.from(k1, "base64")]]);
    assert.throws(() => new SecretBox(keys, 2), /missing/);
  });

  it("a generated OAuth state is 256 random bits within the caller-state rule; only its hash is kept", () => {
    const a = newState();
    assert.match(a, /^[\x21-\x7E]{16,512}$/);
    assert.equal(Buffer.from(a, "base64url").length, 32);
    assert.notEqual(newState(), a);
    assert.match(stateHash(a), /^[0-9a-f]{64}$/);
    assert.ok(!stateHash(a).includes(a));
  });

  it("fuzz: arbitrary envelopes are refused without throwing or echoing input", () => {
    const box = new SecretBox(new Map([[1, Buffer.alloc(32, 3)]]), 1);
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (s) => {
        let error: unknown;
        try {
          box.open(s, "conn_x");
        } catch (err) {
          error = err;
        }
        assert.ok(error instanceof Error, "opened an arbitrary envelope");
        assert.ok(s.length < 4 || !error.message.includes(s));
      }),
      { numRuns: 2000 },
    );
  });
});
