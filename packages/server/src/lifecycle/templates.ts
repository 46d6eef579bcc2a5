import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { failpoint } from "../failpoints/failpoints.js";
import type { UnitRuntime } from "../runtime/runtime.js";
import type { CheckpointRecord, TemplateRecord, UnitRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { TemplateGoneError } from "./errors.js";
import type { UnitTable } from "./unit-table.js";

/** The lock of a template's files (a key of the units' mutex that no unit id can take). */
const lockOf = (t: TemplateRecord) => `template:${t.id}`;

/**
 * Issue #18: organization templates, crash-safe (docs/ARCHITECTURE.md section 6). A template's row
 * is only `ready` while its files (the read-only subvolume `templates/<id>`) are whole: publishing
 * writes the row first, not ready, then the snapshot, then the flag; deleting clears the flag first,
 * then removes the files, then the row. A crash anywhere leaves a row that is not ready, which the
 * start's sweep removes with whatever files it has: nothing half-made survives, and no file of the
 * pool is ever removed for want of a row (another server's templates may share the pool).
 */
export class TemplateWork {
  /** Issue #15: brings a checkpoint's files back from the object store when they are not on the node. */
  private needed:
    | ((unitId: string, cp: CheckpointRecord, progress: (msg: string) => void) => Promise<void>)
    | undefined;

  constructor(
    private readonly table: UnitTable,
    private readonly store: Store,
    private readonly runtime: UnitRuntime,
    private readonly log: Logger,
    /** Issue #15: this node's id (Lifecycle's `nodeId`). */
    private readonly nodeId?: string,
  ) {}

  /** Issue #15: what the node does before a checkpoint is published (CheckpointHooks' `needed`). */
  setNeeded(needed: (unitId: string, cp: CheckpointRecord, progress: (msg: string) => void) => Promise<void>): void {
    this.needed = needed;
  }

  /** Publishes checkpoint `cp` of `source` as a template; TemplateExistsError (store) when the name is taken. */
  async publish(
    source: UnitRecord,
    cp: CheckpointRecord,
    what: { name: string; description: string },
  ): Promise<TemplateRecord> {
    const t: TemplateRecord = {
      id: `tpl-${randomUUID()}`,
      orgId: source.orgId,
      name: what.name,
      description: what.description,
      sourceUnit: source.name,
      sourceCheckpoint: cp.id,
      environmentVersion: source.environmentVersion,
      imageId: source.imageId,
      resources: cp.resources,
      privileges: cp.privileges,
      network: cp.network,
      ready: false,
      createdAt: new Date().toISOString(),
      // Its files are made here: its units are placed on this node.
      nodeId: this.nodeId ?? source.nodeId,
    };
    await this.store.templates.insert(t);
    failpoint("template.recorded");
    try {
      // Under the source's lock: no delete of the unit (or its checkpoint) runs meanwhile.
      await this.table.mutex.run(source.id, async () => {
        this.table.assertNotDeleted(source);
        // Issue #15: its files first, from the object store when they are not on the node.
        await this.needed?.(source.id, cp, () => {});
        await this.runtime.publishTemplate(source.id, cp.id, t.id);
      });
      failpoint("template.snapshotted");
      await this.store.templates.setReady(t.id, true);
    } catch (err) {
      // Nothing half-made stays: what cannot be removed now is the next start's sweep's.
      await this.discard(t).catch((e: unknown) =>
        this.log.error({ err: e, templateId: t.id }, "removing a failed template"),
      );
      throw err;
    }
    return { ...t, ready: true };
  }

  /** Deletes a template; units made from it keep their files (snapshots are independent). */
  delete(t: TemplateRecord): Promise<void> {
    return this.table.mutex.run(lockOf(t), async () => {
      await this.store.templates.setReady(t.id, false);
      failpoint("template.hidden");
      await this.runtime.deleteTemplate(t.id);
      failpoint("template.files-deleted");
      await this.store.templates.delete(t.id);
    });
  }

  /** Gives a new unit a writable snapshot of the template, under the unit's lock then the template's. */
  fill(t: TemplateRecord, unit: UnitRecord): Promise<void> {
    return this.table.mutex.run(unit.id, () => {
      this.table.assertNotDeleted(unit);
      return this.table.mutex.run(lockOf(t), async () => {
        const fresh = await this.store.templates.get(t.orgId, t.name);
        if (fresh?.id !== t.id) throw new TemplateGoneError(t.name);
        await this.runtime.templateDisk(t.id, unit.id);
      });
    });
  }

  private async discard(t: TemplateRecord): Promise<void> {
    await this.runtime.deleteTemplate(t.id);
    await this.store.templates.delete(t.id);
  }

  /**
   * At start: removes every template of this node that is not ready (a crash in its publish or
   * delete), files and row. Another node's is left alone: its publish may be under way.
   */
  async sweep(): Promise<number> {
    let removed = 0;
    for (const t of await this.store.templates.all(this.nodeId)) {
      if (t.ready) continue;
      await this.discard(t);
      removed++;
    }
    if (removed > 0) this.log.info({ removed }, "removed templates a crash left half-made or half-deleted");
    return removed;
  }
}
