import { existsSync } from "node:fs";
import { readdir, rename } from "node:fs/promises";
import { join } from "node:path";
import { failpoint } from "../../failpoints/failpoints.js";
import { deleteSubvolume, snapshot } from "../storage/btrfs.js";
import { hasJournal, readJournal, removeJournal, removeJournalLeftover, writeJournal } from "./checkpoint-journal.js";
import { removePartialReceives, removeUnknownCheckpoints } from "./checkpoints.js";
import { unitQgroup } from "./unit-disk.js";
import type { UnitPaths } from "./unit-paths.js";

/**
 * Replaces a stopped unit's rootfs with a writable snapshot of checkpoint `cpId`. The journal makes
 * it all-or-nothing: written first (phase `replacing`); then rootfs → rootfs.old (rename), a
 * writable snapshot of the checkpoint as rootfs.new → rootfs (rename), and only then the journal's
 * phase becomes `replaced` (an atomic rename). `completeRestore` deletes rootfs.old and the
 * journal. `recoverDisks` rolls back any restore still `replacing` and rolls forward one that is
 * `replaced`.
 */
export async function restoreDisk(paths: UnitPaths, id: string, cpId: string): Promise<void> {
  const src = paths.checkpoint(id, cpId);
  if (!existsSync(src)) throw new Error(`checkpoint ${cpId} has no snapshot`);
  const { disk: dir, rootfs } = paths.unit(id);
  await finishEarlierReplace(paths, id);
  await writeJournal(dir, { checkpoint: cpId, phase: "replacing" });
  failpoint("restore.journaled");
  try {
    if (existsSync(join(dir, "rootfs.new"))) await deleteSubvolume(join(dir, "rootfs.new"));
    if (existsSync(rootfs)) await rename(rootfs, join(dir, "rootfs.old"));
    failpoint("restore.old-moved");
    await snapshot(src, join(dir, "rootfs.new"), { readonly: false, qgroup: unitQgroup(paths, id) });
    failpoint("restore.new-snapshotted");
    await rename(join(dir, "rootfs.new"), rootfs);
    failpoint("restore.new-moved");
  } catch (err) {
    // A step that failed (a full disk, a quota) puts the unit's own files back at once: left
    // aside, its next boot would have found no rootfs and made a fresh one from the image.
    // A roll-back that fails too leaves the journal, which the server's start settles.
    await rollBackReplace(paths, id).catch(() => {});
    throw err;
  }
  await writeJournal(dir, { checkpoint: cpId, phase: "replaced" });
}

/**
 * Before a restore or an upgrade replaces rootfs: an earlier one whose last step failed (the delete
 * of rootfs.old in completeRestore; its journal still says `replaced`, or is gone) is finished
 * first. Its rootfs.old would fail this one's rename, and a roll-back of this one would put those
 * older files back in place of the unit's current ones. One still `replacing` is a crash's, which
 * only the server's start settles (recoverDisks): refused.
 */
export async function finishEarlierReplace(paths: UnitPaths, id: string): Promise<void> {
  const { disk: dir } = paths.unit(id);
  if (!existsSync(join(dir, "rootfs.old"))) return;
  if (hasJournal(dir) && (await readJournal(dir))?.phase !== "replaced") {
    throw new Error(
      `unit ${id} has an interrupted restore (its journal says replacing); restart the server to settle it`,
    );
  }
  await completeRestore(paths, id);
}

export async function completeRestore(paths: UnitPaths, id: string): Promise<void> {
  const dir = paths.unit(id).disk;
  if (existsSync(join(dir, "rootfs.old"))) await deleteSubvolume(join(dir, "rootfs.old"));
  await removeJournal(dir);
}

/**
 * Settles a restore a crash interrupted: one still `replacing` is rolled back (whatever is at
 * rootfs while rootfs.old exists is the new copy); returns the checkpoint of one that is
 * `replaced`, to be rolled forward by the caller.
 */
async function settleRestore(paths: UnitPaths, id: string): Promise<Settled | undefined> {
  const { disk: dir } = paths.unit(id);
  let forward: Settled | undefined;
  if (hasJournal(dir)) {
    const entry = await readJournal(dir);
    if (entry?.phase === "replaced") {
      forward = { checkpoint: entry.checkpoint, ...(entry.image && { image: entry.image }) };
    } else {
      await rollBackReplace(paths, id);
    }
  }
  await removeJournalLeftover(dir);
  return forward;
}

/** What an interrupted restore or upgrade had put in place: the caller records it. */
export interface Settled {
  readonly checkpoint: string;
  /** An upgrade's: the image build the unit is on now. */
  readonly image?: { readonly id: string; readonly version: string };
}

/**
 * Undoes a restore or upgrade that is still `replacing`: whatever is at rootfs while rootfs.old
 * exists is the new copy. Also what an upgrade that failed part way does at once.
 */
export async function rollBackReplace(paths: UnitPaths, id: string): Promise<void> {
  const { disk: dir, rootfs } = paths.unit(id);
  if (existsSync(join(dir, "rootfs.new"))) await deleteSubvolume(join(dir, "rootfs.new"));
  if (existsSync(join(dir, "rootfs.old"))) {
    if (existsSync(rootfs)) await deleteSubvolume(rootfs);
    await rename(join(dir, "rootfs.old"), rootfs);
  }
  await removeJournal(dir);
}

/**
 * After a crash (`UnitRuntime.recover`): settles every interrupted restore of this server's units
 * and removes their checkpoint snapshots the database does not know (`known` answers per unit;
 * undefined: another server's unit on a shared pool). Returns the restores to roll forward.
 */
export async function recoverDisks(
  paths: UnitPaths,
  known: (unitId: string) => Promise<ReadonlySet<string> | undefined>,
): Promise<({ unitId: string } & Settled)[]> {
  const forward: ({ unitId: string } & Settled)[] = [];
  let ids: string[] = [];
  try {
    ids = await readdir(paths.unitsDir);
  } catch {}
  for (const id of ids) {
    const unit = paths.unit(id);
    // Issue #15: receives this server began (their marks name it) whatever the unit's record says:
    // the record of a unit moving here names its old node until the move is done.
    await removePartialReceives(paths, id);
    if (!existsSync(unit.checkpoints) && !hasJournal(unit.disk)) continue;
    const wanted = await known(id);
    if (!wanted) continue; // another server's unit on a shared pool
    const settled = await settleRestore(paths, id);
    if (settled !== undefined) forward.push({ unitId: id, ...settled });
    await removeUnknownCheckpoints(paths, id, wanted);
  }
  return forward;
}
