import type { CheckpointRecord, UnitRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { UnitUnavailableError } from "./errors.js";
import type { MovePlan } from "./move.js";
import { DOWN_AFTER_MS, nodeIsUp } from "./registry/liveness.js";
import type { Progress, UnitNode } from "./unit-node.js";

/**
 * The newest state of the unit that the object store holds: its active checkpoint (the one its
 * files are on: taking a checkpoint or restoring one makes it so) if it is stored, else the one
 * that one was taken from, and so on back. Undefined: nothing of the unit's files is stored.
 */
export function newestStored(
  unit: Pick<UnitRecord, "activeCheckpoint">,
  checkpoints: readonly CheckpointRecord[],
): CheckpointRecord | undefined {
  const byId = new Map(checkpoints.map((c) => [c.id, c]));
  const seen = new Set<string>();
  for (let id = unit.activeCheckpoint; id !== null && !seen.has(id); ) {
    seen.add(id);
    const cp = byId.get(id);
    if (!cp) return undefined;
    if (cp.replica?.state === "replicated") return cp;
    id = cp.sourceId;
  }
  return undefined;
}

/**
 * Issue #15 (docs/SCALE-OUT.md, `ums node drain --from-store`): makes a unit whose node is down
 * again on node `target` from its newest stored checkpoint (newestStored); what changed in it
 * after that checkpoint is lost. The target receives the checkpoint from the object store and
 * makes it the unit's files; then the record names the target, only while it still names the lost
 * node and that node is still down (its next start removes what it holds of the unit). A failure
 * before leaves the unit on the lost node, and what the target received goes. `node` is the
 * node directory.
 */
export async function rehomeUnit(
  store: Store,
  node: UnitNode,
  plan: MovePlan,
  progress: Progress,
): Promise<{ checkpoint: CheckpointRecord; node: string }> {
  const { unit, from, target } = plan;
  const checkpoint = newestStored(unit, await store.checkpoints.list(unit.id));
  if (!checkpoint) {
    throw new UnitUnavailableError(
      `no checkpoint of unit '${unit.name}' (of its files now) is in the object store: it cannot be made again elsewhere`,
    );
  }
  const lost = await store.nodes.get(from);
  if (lost && nodeIsUp(lost)) {
    throw new UnitUnavailableError(`its node '${lost.name}' is up again: move it instead (ums node drain)`);
  }
  const targetName = (await store.nodes.get(target))?.name ?? target;
  progress(`making unit '${unit.name}' again on node '${targetName}' from checkpoint ${checkpoint.id}`);
  try {
    await node.moveIn({ ...unit, nodeId: target }, checkpoint, progress);
    const downBefore = new Date(Date.now() - DOWN_AFTER_MS).toISOString();
    if (!(await store.units.rehome(unit.id, from, target, checkpoint.id, downBefore))) {
      throw new UnitUnavailableError(
        `unit '${unit.name}' was deleted or moved meanwhile, or its node '${lost?.name ?? from}' came back`,
      );
    }
  } catch (err) {
    // What the target received goes (the record, still the lost node's, stays).
    await node.moveDone({ ...unit, nodeId: target }).catch(() => {});
    throw err;
  }
  return { checkpoint, node: targetName };
}
