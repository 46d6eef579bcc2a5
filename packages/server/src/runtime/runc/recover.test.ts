import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { openTestRuntime, type TestRuntime } from "../../testing/runtime.js";
import { snapshot } from "../storage/btrfs.js";

/**
 * Crash safety of checkpoint work (issue: "kill -9 at any point leaves the old or the new state,
 * never in between, and no orphaned subvolume"): the states a crash can leave, fed to recover().
 */
describe("recovery of interrupted checkpoint work", () => {
  let rt: TestRuntime;
  let dataDir: string;
  const ids: string[] = [];
  const unitDir = (id: string) => join(rt.runtime.poolDir, "units", id);
  const file = (id: string) => join(unitDir(id), "rootfs", "home", "unit", "state");

  async function unitWithCheckpoint(): Promise<string> {
    const id = `unit-${randomUUID()}`;
    ids.push(id);
    await rt.runtime.create(id);
    await writeFile(file(id), "old");
    await rt.runtime.checkpoint(id, "v0");
    await writeFile(file(id), "current");
    return id;
  }

  /**
   * What a restore killed midway leaves: its journal and, if it got that far, the old rootfs moved
   * aside and the checkpoint's copy at `copyAt`.
   */
  async function crashedRestore(id: string, journal: object, copyAt?: "rootfs" | "rootfs.new"): Promise<void> {
    const dir = unitDir(id);
    await writeFile(join(dir, "restore.json"), JSON.stringify(journal));
    if (!copyAt) return;
    await rename(join(dir, "rootfs"), join(dir, "rootfs.old"));
    await snapshot(join(dir, "checkpoints", "v0"), join(dir, copyAt));
  }

  /** recover() on a database that knows checkpoint v0 of `id` and no other unit. */
  const recoverKnowing = (id: string) => rt.runtime.recover(async (u) => (u === id ? new Set(["v0"]) : undefined));

  async function assertRolledBack(id: string): Promise<void> {
    assert.equal(await readFile(file(id), "utf8"), "current", "the old state is back");
    for (const leftover of ["rootfs.old", "rootfs.new", "restore.json"])
      assert.equal(existsSync(join(unitDir(id), leftover)), false, leftover);
  }

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "ums-recover-"));
    rt = await openTestRuntime(dataDir);
  });
  after(async () => {
    for (const id of ids) {
      await rt.runtime.destroy(id);
      await rt.runtime.forget(id);
    }
    await rt.release();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("rolls back a restore that crashed before the new files were in place", async () => {
    const id = await unitWithCheckpoint();
    await crashedRestore(id, { checkpoint: "v0", phase: "replacing" }, "rootfs.new");
    assert.deepEqual(await recoverKnowing(id), []);
    await assertRolledBack(id);
  });

  it("rolls back a restore whose new files were moved in but not yet journaled as replaced", async () => {
    const id = await unitWithCheckpoint();
    await crashedRestore(id, { checkpoint: "v0", phase: "replacing" }, "rootfs");
    assert.deepEqual(await recoverKnowing(id), []);
    await assertRolledBack(id);
  });

  it("rolls back a journal that names no phase, and keeps the files untouched when nothing moved", async () => {
    const id = await unitWithCheckpoint();
    await crashedRestore(id, { checkpoint: "v0" });
    assert.deepEqual(await recoverKnowing(id), []);
    assert.equal(await readFile(file(id), "utf8"), "current");
    assert.equal(existsSync(join(unitDir(id), "restore.json")), false);
  });

  it("rolls forward a restore that crashed after the new files were in place", async () => {
    const id = await unitWithCheckpoint();
    const dir = unitDir(id);
    await crashedRestore(id, { checkpoint: "v0", phase: "replaced" }, "rootfs");
    assert.deepEqual(await recoverKnowing(id), [{ unitId: id, checkpoint: "v0" }]);
    await rt.runtime.completeRestore(id);
    assert.equal(await readFile(file(id), "utf8"), "old", "the new state stays");
    assert.equal(existsSync(join(dir, "rootfs.old")), false);
    assert.equal(existsSync(join(dir, "restore.json")), false);
  });

  it("removes checkpoint snapshots the database does not know, and leaves other servers' units alone", async () => {
    const id = await unitWithCheckpoint();
    await rt.runtime.checkpoint(id, "v1");
    const stranger = await unitWithCheckpoint();
    await recoverKnowing(id);
    assert.equal(rt.runtime.hasCheckpoint(id, "v0"), true);
    assert.equal(rt.runtime.hasCheckpoint(id, "v1"), false, "an orphan from a crash before its row was written");
    assert.equal(rt.runtime.hasCheckpoint(stranger, "v0"), true);
  });
});
