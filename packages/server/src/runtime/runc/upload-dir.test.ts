import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { run } from "../exec/host-command.js";
import { testImage } from "../image/test-image.js";
import { loopBackingDevice } from "../storage/mounts.js";
import { removeImported, uploadDir } from "./imported-images.js";
import { UnitPaths } from "./unit-paths.js";

/*
 * Issue #18: where an import writes the archive it receives (imported-images.ts uploadDir): beside
 * the data dir when the pool is a loop file on its filesystem, else in the pool, uncompressed and
 * not copy-on-write.
 */

describe("where image uploads are written", { skip: process.getuid?.() === 0 ? false : "needs root" }, () => {
  let pool: string;
  const made: string[] = [];
  before(async () => {
    pool = (await testImage()).pool.path;
  });
  after(async () => {
    for (const d of made) await rm(d, { recursive: true, force: true });
  });

  it("the pool is a loop file on the data dir's filesystem: uploads go to the data dir, skipping btrfs", async () => {
    const backing = await loopBackingDevice(pool);
    assert.ok(backing !== undefined, "the shared test pool is on a loop device");
    // Beside the pool's mount point, where the test pool keeps its file (pool.img).
    const dataDir = await mkdtemp(join(pool, "..", "upload-dir-"));
    made.push(dataDir);
    assert.equal((await stat(dataDir)).dev, backing, "this test's data dir is on the pool file's filesystem");
    const paths = new UnitPaths(dataDir, pool, "uploadtest");
    assert.equal(await uploadDir(paths), join(dataDir, "uploads"));
    assert.equal((await stat(join(dataDir, "uploads"))).mode & 0o777, 0o700);
  });

  it("a data dir on another filesystem: uploads go to the pool, neither compressed nor copy-on-write", async (t) => {
    if (!existsSync("/dev/shm")) return t.skip("no /dev/shm here");
    const dataDir = await mkdtemp("/dev/shm/ums-upload-dir-");
    made.push(dataDir);
    const paths = new UnitPaths(dataDir, pool, "uploadtest");
    const dir = await uploadDir(paths);
    assert.equal(dir, join(pool, "imported", ".uploads"));
    const { stdout } = await run("lsattr", ["-d", dir]);
    const flags = stdout.split(" ")[0] ?? "";
    assert.match(flags, /C/, stdout);
    assert.match(flags, /m/, stdout);
    assert.equal(await uploadDir(paths), dir, "asked again: the same");

    // What a crash in an import leaves there goes with the image (the start's sweep removes it so).
    const left = join(dir, "img-uploadtest-crashed.tar");
    await writeFile(left, "half an archive");
    const leftInData = join(dataDir, "uploads", "img-uploadtest-crashed.tar");
    await run("mkdir", ["-p", join(dataDir, "uploads")]);
    await writeFile(leftInData, "half an archive");
    await removeImported(paths, "img-uploadtest-crashed");
    assert.ok(!existsSync(left) && !existsSync(leftInData));
  });
});
