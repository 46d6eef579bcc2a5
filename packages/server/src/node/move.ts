import { UnitBusyError } from "../lifecycle/errors.js";
import type { CheckpointRecord, UnitRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import type { Progress, UnitNode } from "./unit-node.js";

/** Where a unit goes: its node now, and the node placement chose for it. */
export interface MovePlan {
  readonly unit: UnitRecord;
  readonly from: string;
  readonly target: string;
}

/**
 * Issue #15 (docs/SCALE-OUT.md): moves a unit between nodes, for the API (`POST
 * /v1/units/{name}/move`) and `ums node drain`. Its node stops it and saves its files as a
 * checkpoint; the target receives that checkpoint straight from the old node (incremental against
 * one both have, else whole; from the store if the old node cannot send it) and makes it the unit's
 * files; then the unit's record names the target (only while it still names the old node), and the
 * old node removes the unit but the snapshots it keeps (the parent of a move back, and those it
 * still copies to the store). A failure before the record changes leaves the unit
 * where it was, and what the target received goes. `node` is the API's node directory.
 */
export async function moveUnit(
  store: Store,
  node: UnitNode,
  plan: MovePlan,
  progress: Progress,
): Promise<{ checkpoint: CheckpointRecord; node: string }> {
  const { unit, from, target } = plan;
  const targetName = (await store.nodes.get(target))?.name ?? target;
  progress(`moving unit '${unit.name}' to node '${targetName}'`);
  const taken = await node.moveOut(unit, progress);
  // As the store has it now (copied), not as it was taken.
  const checkpoint = (await store.checkpoints.get(unit.id, taken.id)) ?? taken;
  try {
    await node.moveIn({ ...unit, nodeId: target }, checkpoint, progress, from);
    if (!(await store.units.moveTo(unit.id, from, target, checkpoint.id))) {
      throw new UnitBusyError(`unit '${unit.name}' was deleted or moved meanwhile`);
    }
  } catch (err) {
    // What the target received goes (the record, still the old node's, stays).
    await node.moveDone({ ...unit, nodeId: target }).catch(() => {});
    await node.moveAborted(unit).catch(() => {});
    throw err;
  }
  await node
    .moveDone(unit)
    .catch((err: unknown) =>
      progress(
        `the old node could not remove the unit's old files (${err instanceof Error ? err.message : String(err)}): they stay on it`,
      ),
    );
  return { checkpoint, node: targetName };
}
