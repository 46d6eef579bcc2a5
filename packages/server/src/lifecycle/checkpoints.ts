import { failpoint } from "../failpoints/failpoints.js";
import type { StopOpts, UnitRuntime } from "../runtime/runtime.js";
import type { CheckpointRecord, ImageRecord, OrgRecord, UnitRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { ActiveCheckpointError, UpgradeRefusedError } from "./errors.js";
import { lockOf as imageLock } from "./images.js";
import type { UnitTable } from "./unit-table.js";

export interface CheckpointResult {
  readonly checkpoint: CheckpointRecord;
  /** How long the unit's processes were frozen (0 when it was not running). */
  readonly frozenMs: number;
}

/** What checkpoint work needs of the state machine (lifecycle.ts), called under the unit's lock. */
export interface UnitControl {
  /** Stops the unit's processes and forgets it as running (it is cold). */
  stopLocked(unit: UnitRecord, opts?: StopOpts): Promise<void>;
  /** Boots the unit (or resumes it) and records it as running. */
  ensureRunningLocked(org: OrgRecord, unit: UnitRecord): Promise<void>;
}

/** Issue #15: what a node does besides (its object store's copies), told by the checkpoint work. */
export interface CheckpointHooks {
  /** A checkpoint was taken and recorded (its copy is queued). Called under the unit's lock: quick. */
  taken?(unitId: string, cpId: string): Promise<void>;
  /** Before a restore or a fork of `cp`: its files are brought back when they are not on the node. */
  needed?(unitId: string, cp: CheckpointRecord, progress: (msg: string) => void): Promise<void>;
  /** A checkpoint was deleted (its copy goes). Called after the unit's lock is released. */
  deleted?(unitId: string, cpId: string): Promise<void>;
  /** Before a snapshot of the unit is deleted: what reads it stops; the returned function lets it go on. */
  deleting?(unitId: string): Promise<() => void>;
}

/**
 * Checkpoints (spec 4.2), restores (spec 3.3), forks and deletions, each under its unit's lock.
 * The disk work is the runtime's (journaled there); the failpoints mark the steps a crash test
 * interrupts (lifecycle/crash.test.ts), and every step leaves the database and the disk agreeing
 * or recoverable at the next start (docs/ARCHITECTURE.md section 6).
 */
export class CheckpointWork {
  private hooks: CheckpointHooks = {};

  constructor(
    private readonly table: UnitTable,
    private readonly store: Store,
    private readonly runtime: UnitRuntime,
    private readonly control: UnitControl,
    /** This node's id (issue #15): a fork of another node's unit leaves nothing of that unit here. */
    private readonly nodeId?: string,
  ) {}

  setHooks(hooks: CheckpointHooks): void {
    this.hooks = hooks;
  }

  /** A checkpoint of the unit's files (and the policies in force), taken live: frozen only for the snapshot. */
  checkpoint(unit: UnitRecord, comment: string, progress: (msg: string) => void): Promise<CheckpointResult> {
    return this.table.mutex.run(unit.id, () => {
      this.table.assertNotDeleted(unit);
      return this.take(unit, comment, progress);
    });
  }

  private async take(
    unit: UnitRecord,
    comment: string,
    progress: (msg: string) => void,
    auto = false,
  ): Promise<CheckpointResult> {
    const fresh = (await this.store.units.getById(unit.id)) ?? unit;
    const seq = await this.store.checkpoints.nextSeq(unit.id);
    const id = `v${seq}`;
    progress(`saving the files of unit '${unit.name}' as checkpoint ${id}`);
    const { frozenMs } = await this.runtime.checkpoint(unit.id, id);
    failpoint("checkpoint.snapshotted");
    const cp: CheckpointRecord = {
      unitId: unit.id,
      id,
      seq,
      comment,
      sourceId: fresh.activeCheckpoint,
      resources: fresh.resources,
      privileges: fresh.privileges,
      network: fresh.network,
      createdAt: new Date().toISOString(),
      auto,
    };
    // A crash before this insert leaves a snapshot the database does not know: removed at start.
    await this.store.checkpoints.insert(cp);
    failpoint("checkpoint.recorded");
    await this.store.units.update(unit.orgId, unit.name, { activeCheckpoint: id });
    await this.hooks.taken?.(unit.id, id);
    return { checkpoint: cp, frozenMs };
  }

  /**
   * Spec 3.3: the current state is saved first (nothing is ever lost by a restore), processes are
   * stopped, the files and policies become the checkpoint's, and the unit boots.
   */
  restore(
    org: OrgRecord,
    unit: UnitRecord,
    cp: CheckpointRecord,
    progress: (msg: string) => void,
  ): Promise<CheckpointRecord> {
    return this.table.mutex.run(unit.id, async () => {
      this.table.assertNotDeleted(unit);
      // Its files first (from the object store, when they are not on the node): a failure here changes nothing.
      await this.hooks.needed?.(unit.id, cp, progress);
      const t = this.table.get(unit.id);
      if (t) t.changing = true;
      let backup: CheckpointResult;
      try {
        backup = await this.take(unit, `automatic backup before restoring ${cp.id}`, progress, true);
      } catch (err) {
        if (t) t.changing = false;
        throw err;
      }
      progress(`saved the current state as ${backup.checkpoint.id}; stopping the unit`);
      failpoint("restore.backed-up");
      // The unit boots again at once: its link stays for that boot (StopOpts.keepLink).
      await this.control.stopLocked(unit, { keepLink: true });
      try {
        failpoint("restore.stopped");
        progress(`restoring the files of checkpoint ${cp.id}`);
        await this.runtime.restoreDisk(unit.id, cp.id);
        failpoint("restore.swapped");
        await this.recordRestore(unit, cp);
        failpoint("restore.recorded");
      } catch (err) {
        // No boot follows: the kept link goes (the unit is stopped already; what its stop reports
        // again of the container is not this failure).
        await this.runtime.stop(unit.id).catch(() => {});
        throw err;
      }
      progress("booting the unit");
      const fresh = (await this.store.units.getById(unit.id)) ?? unit;
      // The replaced files (a subvolume delete) go while the unit boots on the new ones: a crash
      // meanwhile finishes the restore at the next start (its journal says `replaced`).
      const [completed, booted] = await Promise.allSettled([
        this.runtime.completeRestore(unit.id),
        this.control.ensureRunningLocked(org, fresh),
      ]);
      if (completed.status === "rejected") throw completed.reason;
      if (booted.status === "rejected") throw booted.reason;
      return backup.checkpoint;
    });
  }

  /**
   * Issue #18: moves a unit made from an image to a newer build `to` of it where that is safe
   * (runtime/runc/upgrade.ts has the rule): checked first on the unit as it runs (a refusal
   * disturbs nothing), then the unit is stopped, its state saved as a checkpoint (restoring it
   * brings the older system back), checked again on that checkpoint, given the newer build's
   * system trees, and booted. UpgradeRefusedError with the reasons when it is not safe.
   */
  upgrade(
    org: OrgRecord,
    unit: UnitRecord,
    to: ImageRecord,
    progress: (msg: string) => void,
  ): Promise<CheckpointRecord> {
    return this.table.mutex.run(unit.id, () =>
      this.table.mutex.run(imageLock(to), async () => {
        this.table.assertNotDeleted(unit);
        const fresh = (await this.store.units.getById(unit.id)) ?? unit;
        const from = fresh.imageId;
        if (from === null) throw new UpgradeRefusedError(unit.name, ["it was made from the base image"]);
        const refuse = (check: { paths: string[]; count: number; problems: string[] }) => {
          const reasons = [...check.problems];
          if (check.count > 0) {
            const more = check.count > check.paths.length ? ` and ${check.count - check.paths.length} more` : "";
            reasons.push(
              `it changed system files that the newer build would replace: ${check.paths.map((p) => `/${p}`).join(", ")}${more}; put that work in the image (a recipe's packages or steps) and create a unit from it, or keep this unit on its build`,
            );
          }
          if (reasons.length > 0) throw new UpgradeRefusedError(unit.name, reasons);
        };
        progress(`comparing unit '${unit.name}' with the build it was made from`);
        refuse(await this.runtime.upgradeCheck(unit.id, from));
        const t = this.table.get(unit.id);
        if (t) t.changing = true;
        try {
          await this.control.stopLocked(fresh);
          const backup = await this.take(
            fresh,
            `automatic backup before upgrading to ${to.environmentVersion}`,
            progress,
            true,
          );
          // The unit may have written until it stopped: the checkpoint is what is moved, checked again.
          try {
            refuse(await this.runtime.upgradeCheck(unit.id, from, backup.checkpoint.id));
          } catch (err) {
            await this.control.ensureRunningLocked(org, (await this.store.units.getById(unit.id)) ?? fresh);
            throw err;
          }
          failpoint("upgrade.checked");
          progress(`giving unit '${unit.name}' the system files of ${to.environmentVersion}`);
          await this.runtime.upgradeDisk(unit.id, backup.checkpoint.id, { id: to.id, version: to.environmentVersion });
          failpoint("upgrade.swapped");
          await this.store.units.update(unit.orgId, unit.name, {
            imageId: to.id,
            imageVersion: to.environmentVersion,
            updatedAt: new Date().toISOString(),
          });
          await this.runtime.completeRestore(unit.id);
          progress("booting the unit");
          await this.control.ensureRunningLocked(org, (await this.store.units.getById(unit.id)) ?? fresh);
          return backup.checkpoint;
        } finally {
          if (t) t.changing = false;
        }
      }),
    );
  }

  /** The unit is on checkpoint `cp` now: its files are (restored) and its policies become the checkpoint's. */
  async recordRestore(unit: UnitRecord, cp: CheckpointRecord): Promise<void> {
    await this.store.units.update(unit.orgId, unit.name, {
      activeCheckpoint: cp.id,
      resources: cp.resources,
      privileges: cp.privileges,
      network: cp.network,
      updatedAt: new Date().toISOString(),
    });
  }

  /**
   * Gives a new unit a copy of another unit's checkpoint as its disk (fork), under both units'
   * locks: a delete of the new unit waits for the copy and then removes it. The new unit is locked
   * first; that cannot deadlock, since while it is held it does not run, so no wake of another
   * unit (makeRoom) ever waits for it while holding the source.
   */
  fork(source: UnitRecord, cp: CheckpointRecord, unit: UnitRecord): Promise<void> {
    return this.table.mutex.run(unit.id, () => {
      this.table.assertNotDeleted(unit);
      return this.table.mutex.run(source.id, async () => {
        this.table.assertNotDeleted(source);
        await this.hooks.needed?.(source.id, cp, () => {});
        // Issue #15: the source is another node's; what this one received of it (from the object
        // store) goes once the fork has its own copy, under the source's lock: no other fork of it
        // here is between its receive and its copy.
        const foreign = this.nodeId !== undefined && source.nodeId !== null && source.nodeId !== this.nodeId;
        try {
          await this.runtime.forkDisk(source.id, cp.id, unit.id);
        } finally {
          if (foreign) {
            await this.runtime.destroy(source.id);
            await this.runtime.forget(source.id);
          }
        }
      });
    });
  }

  /**
   * Issue #15 retention (node/local/retention.ts): deletes the local snapshots of the checkpoints
   * `choose` names, never their rows (the object store holds them; a restore or fork receives them
   * again). Under the unit's lock, so no restore, fork, publish or receive of the unit's
   * checkpoints runs meanwhile; `choose` sees the unit and its rows as they are under it. Returns
   * the ids whose snapshots went.
   */
  evictLocal(
    unitId: string,
    choose: (unit: UnitRecord, rows: CheckpointRecord[]) => readonly string[],
  ): Promise<readonly string[]> {
    return this.table.mutex.run(unitId, async () => {
      if (this.table.isGoing(unitId)) return [];
      const unit = await this.store.units.getById(unitId);
      if (!unit) return [];
      const ids = choose(unit, await this.store.checkpoints.list(unitId));
      for (const id of ids) await this.runtime.deleteCheckpoint(unitId, id);
      return ids;
    });
  }

  /** Deletes a checkpoint that is not the unit's active one (checked under the lock: no restore can race it). */
  async delete(unit: UnitRecord, cp: CheckpointRecord): Promise<void> {
    await this.table.mutex.run(unit.id, async () => {
      this.table.assertNotDeleted(unit);
      const fresh = (await this.store.units.getById(unit.id)) ?? unit;
      if (fresh.activeCheckpoint === cp.id) throw new ActiveCheckpointError(unit.name, cp.id);
      // The row goes first: a crash before the snapshot is deleted leaves an orphan, removed at start.
      await this.store.checkpoints.delete(unit.id, cp.id);
      failpoint("delete.row-deleted");
      const resume = await this.hooks.deleting?.(unit.id);
      try {
        await this.runtime.deleteCheckpoint(unit.id, cp.id);
      } finally {
        resume?.();
      }
    });
    await this.hooks.deleted?.(unit.id, cp.id);
  }
}
