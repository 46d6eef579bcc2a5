import { existsSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { failpoint } from "../../failpoints/failpoints.js";
import { createMarkerDurably, syncDir } from "../../util/durable-file.js";
import { run } from "../exec/host-command.js";
import type { RuntimeState } from "../runtime.js";
import { deleteSubvolume, isSubvolume, snapshot } from "../storage/btrfs.js";
import { unitQgroup } from "./unit-disk.js";
import type { UnitPaths } from "./unit-paths.js";

/** What taking a checkpoint needs of the runtime: a unit's state, and freezing and thawing it. */
export interface Freezable {
  state(id: string): Promise<RuntimeState>;
  pause(id: string): Promise<void>;
  resume(id: string): Promise<void>;
}

/** A read-only snapshot of the unit's rootfs as checkpoint `cpId`; the unit must have its disk. */
export async function takeCheckpoint(
  paths: UnitPaths,
  unit: Freezable,
  id: string,
  cpId: string,
): Promise<{ frozenMs: number }> {
  const { checkpoints, rootfs } = paths.unit(id);
  await mkdir(checkpoints, { recursive: true });
  const dst = paths.checkpoint(id, cpId);
  const running = (await unit.state(id)) === "running";
  const started = performance.now();
  // Freeze (a no-op for a paused or stopped unit) so that no process moves on while the snapshot
  // is taken. A btrfs snapshot is atomic either way (crash-consistent): if the freeze cannot
  // settle (a task stuck in the kernel), the snapshot is taken unfrozen rather than failing.
  let frozen = running;
  if (running) {
    try {
      await unit.pause(id);
    } catch {
      frozen = false;
    }
  }
  let frozenMs = 0;
  try {
    if (frozen) failpoint("checkpoint.frozen");
    await snapshot(rootfs, dst, { readonly: true, qgroup: unitQgroup(paths, id) });
  } finally {
    if (frozen) await unit.resume(id);
    frozenMs = frozen ? performance.now() - started : 0;
  }
  await paths.checkpointView(id).refresh();
  return { frozenMs };
}

export async function deleteCheckpoint(paths: UnitPaths, id: string, cpId: string): Promise<void> {
  const path = paths.checkpoint(id, cpId);
  // Unbind it from the unit's view first: a mounted snapshot cannot be deleted.
  await paths.checkpointView(id).hide(cpId);
  failpoint("delete.hidden");
  if (existsSync(path)) await deleteSubvolume(path);
  await paths.checkpointView(id).refresh();
}

/** Deletes the unit's checkpoint snapshots not in `wanted` (orphans of a crash before their row was written). */
export async function removeUnknownCheckpoints(
  paths: UnitPaths,
  id: string,
  wanted: ReadonlySet<string>,
): Promise<void> {
  let cps: string[] = [];
  try {
    cps = await readdir(paths.unit(id).checkpoints);
  } catch {}
  for (const cp of cps) {
    if (wanted.has(cp)) continue;
    // A crash after the snapshot was shown in the unit's view leaves it bound there.
    await paths.checkpointView(id).hide(cp);
    await deleteSubvolume(paths.checkpoint(id, cp));
  }
}

/**
 * Issue #15: checkpoint `cpId` is about to be received (from the object store or another node).
 * Its mark (UnitPaths.receivingMark) is written durably first; the returned `settle` removes it
 * once the snapshot's files are on the disk. A snapshot left by an earlier receive that never
 * finished goes first.
 */
export async function beginReceive(paths: UnitPaths, id: string, cpId: string): Promise<() => Promise<void>> {
  const mark = paths.receivingMark(id, cpId);
  await mkdir(paths.unit(id).checkpoints, { recursive: true });
  if (existsSync(mark)) await removePartialSnapshot(paths, id, cpId);
  else await createMarkerDurably(mark);
  return async () => {
    // The snapshot's files reach the disk before its mark goes: a crash after the mark's removal
    // must find them whole (btrfs may commit the removal ahead of data still in the page cache).
    // (A failed receive's snapshot is deleted before: nothing to sync then.)
    const path = paths.checkpoint(id, cpId);
    if (existsSync(path)) await run("btrfs", ["filesystem", "sync", path]);
    await rm(mark, { force: true });
    // The unit deleted meanwhile took its directory, mark and all.
    await syncDir(dirname(mark)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
  };
}

/** Deletes what receives this server began and never finished left of the unit's snapshots (at start). */
export async function removePartialReceives(paths: UnitPaths, id: string): Promise<string[]> {
  let names: string[] = [];
  try {
    names = await readdir(paths.unit(id).disk);
  } catch {
    return [];
  }
  const partial = paths.receivingIn(names);
  for (const cpId of partial) {
    await removePartialSnapshot(paths, id, cpId);
    await rm(paths.receivingMark(id, cpId), { force: true });
  }
  return partial;
}

async function removePartialSnapshot(paths: UnitPaths, id: string, cpId: string): Promise<void> {
  await paths.checkpointView(id).hide(cpId);
  const path = paths.checkpoint(id, cpId);
  if (await isSubvolume(path)) await deleteSubvolume(path);
}
