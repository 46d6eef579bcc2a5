import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
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
    // The runtime is released whatever a unit's delete says (its firewall process would hold the run).
    try {
      for (const id of ids) {
        await rt.runtime.destroy(id);
        await rt.runtime.forget(id);
      }
    } finally {
      await rt.release();
      await rm(dataDir, { recursive: true, force: true });
    }
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

  // Not crashes: steps of a live restore that fail, and what an earlier one left behind.
  it("puts the unit's files back when a restore's copy fails, and journals nothing", async () => {
    const id = await unitWithCheckpoint();
    // A checkpoint whose files are no snapshot: btrfs refuses to copy it, after rootfs moved aside.
    const fake = join(unitDir(id), "checkpoints", "v1");
    await mkdir(fake);
    try {
      await assert.rejects(rt.runtime.restoreDisk(id, "v1"));
    } finally {
      await rm(fake, { recursive: true }); // the unit's delete takes only snapshots there
    }
    await assertRolledBack(id);
    await rt.runtime.create(id); // a boot's: the unit's own files are there, none made anew
    assert.equal(await readFile(file(id), "utf8"), "current");
  });

  it("finishes an earlier restore whose delete of rootfs.old failed before it replaces rootfs", async () => {
    const id = await unitWithCheckpoint();
    const dir = unitDir(id);
    // An earlier restore that got to `replaced`; its old files (older still) are left.
    await snapshot(join(dir, "rootfs"), join(dir, "rootfs.old"));
    await writeFile(join(dir, "rootfs.old", "home", "unit", "state"), "older");
    await writeFile(join(dir, "restore.json"), JSON.stringify({ checkpoint: "v0", phase: "replaced" }));
    await rt.runtime.restoreDisk(id, "v0");
    assert.equal(await readFile(file(id), "utf8"), "old", "the checkpoint's files are in place");
    assert.equal(
      await readFile(join(dir, "rootfs.old", "home", "unit", "state"), "utf8"),
      "current",
      "what is aside is the state this restore replaced, not the earlier one's",
    );
    await rt.runtime.completeRestore(id);
    assert.equal(existsSync(join(dir, "rootfs.old")), false);
    assert.equal(existsSync(join(dir, "restore.json")), false);
  });

  it("refuses a restore, and fresh files at a boot, while a crashed restore is unsettled", async () => {
    const id = await unitWithCheckpoint();
    await crashedRestore(id, { checkpoint: "v0", phase: "replacing" }, "rootfs.new");
    await assert.rejects(rt.runtime.restoreDisk(id, "v0"), /interrupted restore/);
    await assert.rejects(rt.runtime.create(id), /interrupted restore/);
    assert.deepEqual(await recoverKnowing(id), []);
    await assertRolledBack(id);
  });
});
