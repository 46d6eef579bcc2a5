import assert from "node:assert/strict";
import { chmod, chown, lchown, lstat, mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { suiteTempDir } from "../../testing/temp-dir.js";
import { shiftId, shiftTree, UID_RANGE, UID_SHIFT, unshiftId } from "./shift.js";

describe("shiftId", () => {
  it("maps image ids into the unit's range and leaves shifted ids alone", () => {
    assert.equal(UID_SHIFT, 100000);
    assert.equal(UID_RANGE, 65536);
    assert.equal(shiftId(0), 100000);
    assert.equal(shiftId(1000), 101000);
    assert.equal(shiftId(65534), 165534);
    assert.equal(shiftId(100000), 100000);
    assert.equal(shiftId(101000), 101000);
    assert.equal(shiftId(shiftId(42)), shiftId(42), "idempotent");
    assert.equal(shiftId(5, 200000, 1000), 200005);
  });
  it("refuses ids a unit cannot map", () => {
    assert.throws(() => shiftId(65536), RangeError);
    assert.throws(() => shiftId(99999), RangeError);
    assert.throws(() => shiftId(-1), RangeError);
    assert.throws(() => shiftId(1.5), RangeError);
  });
  it("unshiftId is the inverse inside the range", () => {
    assert.equal(unshiftId(100000), 0);
    assert.equal(unshiftId(101000), 1000);
    assert.equal(unshiftId(165535), 65535);
    assert.equal(unshiftId(165536), undefined);
    assert.equal(unshiftId(0), undefined);
  });
});

describe("shiftTree", { skip: process.getuid?.() === 0 ? false : "needs root (chown)" }, () => {
  const dir = suiteTempDir("ums-shift-");

  it("shifts every owner with lchown, keeps setuid/setgid bits, and is idempotent", async () => {
    const root = join(dir(), "root");
    await mkdir(join(root, "home/unit"), { recursive: true });
    await chown(join(root, "home/unit"), 1000, 1000);
    await writeFile(join(root, "home/unit/.bashrc"), "# hi\n");
    await chown(join(root, "home/unit/.bashrc"), 1000, 1000);
    await writeFile(join(root, "sudo"), "#!/bin/sh\n");
    await chmod(join(root, "sudo"), 0o4755);
    await writeFile(join(root, "sgid"), "x");
    await chown(join(root, "sgid"), 0, 42);
    await chmod(join(root, "sgid"), 0o2755);
    await mkdir(join(root, "shared"));
    await chmod(join(root, "shared"), 0o2775);
    await symlink("sudo", join(root, "link"));
    await lchown(join(root, "link"), 1000, 1000);
    await symlink("/nonexistent", join(root, "dangling"));
    await writeFile(join(root, "already"), "x");
    await chown(join(root, "already"), 101000, 100000);

    const first = await shiftTree(root);
    assert.equal(first.entries, 10);
    assert.equal(first.changed, 9);

    const own = async (p: string) => {
      const s = await lstat(join(root, p));
      return [s.uid, s.gid, s.mode & 0o7777];
    };
    assert.deepEqual(await own(""), [100000, 100000, 0o755]);
    assert.deepEqual(await own("home/unit"), [101000, 101000, 0o755]);
    assert.deepEqual(await own("home/unit/.bashrc"), [101000, 101000, 0o644]);
    assert.deepEqual(await own("sudo"), [100000, 100000, 0o4755]);
    assert.deepEqual(await own("sgid"), [100000, 100042, 0o2755]);
    assert.deepEqual(await own("shared"), [100000, 100000, 0o2775]);
    assert.deepEqual((await own("link")).slice(0, 2), [101000, 101000]);
    assert.deepEqual((await own("dangling")).slice(0, 2), [100000, 100000]);
    assert.deepEqual(await own("already"), [101000, 100000, 0o644]);

    const second = await shiftTree(root);
    assert.equal(second.entries, 10);
    assert.equal(second.changed, 0);
  });

  it("reports an id it cannot map with its path", async () => {
    const root = join(dir(), "bad");
    await mkdir(root);
    await writeFile(join(root, "f"), "x");
    await chown(join(root, "f"), 70000, 0);
    await assert.rejects(shiftTree(root), /bad\/f: id 70000 is outside/);
  });
});
