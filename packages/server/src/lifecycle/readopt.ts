import type { Logger } from "pino";
import type { UnitRuntime } from "../runtime/runtime.js";
import { onNode, type UnitStatus } from "../store/records.js";
import type { Store } from "../store/store.js";
import type { CheckpointWork } from "./checkpoints.js";
import type { UnitTable } from "./unit-table.js";

/**
 * What a server does as it starts (docs/ARCHITECTURE.md section 8): units that kept running are
 * adopted again (their status in the database follows what runs), containers whose unit is gone
 * are stopped, and deletes and checkpoint work a crash interrupted are finished or rolled back.
 * Issue #15: a node does this for its own units only (`nodeId`; and those that name no node, which
 * it claims as it registers): another node's records are left as they are (docs/SCALE-OUT.md).
 */
export async function reconcile(deps: {
  store: Store;
  runtime: UnitRuntime;
  table: UnitTable;
  checkpoints: CheckpointWork;
  log: Logger;
  running: (unitId: string) => Promise<void>;
  /** This node's id; undefined: every unit is its own (as before nodes). */
  nodeId?: string | undefined;
}): Promise<void> {
  const { store, runtime, table, log } = deps;
  const mine = (unit: { nodeId: string | null }) => onNode(unit, deps.nodeId);
  // Deletes a crash interrupted are finished first: their units are not adopted again.
  // A host command the killed server started may still be removing a part of it: a few tries.
  for (const id of await runtime.deleting()) {
    for (let attempt = 1; ; attempt++) {
      try {
        await runtime.destroy(id);
        const unit = await store.units.getById(id);
        // Its tombstone is this node's; a record that names another node is that node's.
        if (unit && mine(unit)) await store.units.delete(unit.orgId, unit.name);
        await runtime.forget(id);
        log.info({ unitId: id, unit: unit?.name }, "finished a delete interrupted by a crash");
        break;
      } catch (err) {
        if (attempt >= 3) {
          log.error(
            { err, unitId: id },
            "finishing a delete interrupted by a crash failed; the next start tries again",
          );
          break;
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }
  const live = await runtime.running();
  for (const [id, state] of live) {
    const unit = await store.units.getById(id);
    if (!unit) {
      log.warn({ unitId: id }, "stopping a container whose unit no longer exists");
      await runtime.stop(id).catch((err) => log.error({ err, unitId: id }, "stop failed"));
      continue;
    }
    if (!mine(unit)) {
      // Its unit is another node's (it holds the unit's disk): that node's record is left as it is.
      log.warn({ unit: unit.name, unitId: id, node: unit.nodeId }, "stopping a container whose unit is another node's");
      await runtime.stop(id).catch((err) => log.error({ err, unitId: id }, "stop failed"));
      continue;
    }
    const status: UnitStatus = state === "paused" ? "warm" : "running";
    table.track(unit, status);
    // A full idle period from now: unknown activity is not idleness (the first sweep would pause it).
    table.activity.touch(id);
    await deps.running(id);
    if (unit.status !== status) await table.persist(unit, status);
    log.info({ unit: unit.name, unitId: id, status }, "re-adopted a unit that kept running");
  }
  for (const unit of await store.units.withStatus(["running", "warm"], deps.nodeId)) {
    if (!live.has(unit.id)) await table.persist(unit, "cold");
  }
  // Interrupted checkpoint work: restores whose new files are in place are recorded now.
  const forward = await runtime.recover(async (unitId) => {
    // Undefined: not this node's (its disk may be in a pool another node shares), left as it is.
    const unit = await store.units.getById(unitId);
    if (!unit || !mine(unit)) return undefined;
    return new Set((await store.checkpoints.list(unitId)).map((c) => c.id));
  });
  for (const { unitId, checkpoint, image } of forward) {
    const unit = await store.units.getById(unitId);
    const cp = unit && (await store.checkpoints.get(unitId, checkpoint));
    if (unit && cp) await deps.checkpoints.recordRestore(unit, cp);
    // An upgrade's new disk has the newer build's system files: the unit is on that build now.
    if (unit && image)
      await store.units.update(unit.orgId, unit.name, { imageId: image.id, imageVersion: image.version });
    await runtime.completeRestore(unitId);
    log.info({ unitId, checkpoint, image: image?.version }, "finished a restore or upgrade interrupted by a crash");
  }
}
