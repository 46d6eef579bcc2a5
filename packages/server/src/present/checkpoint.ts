import type { CheckpointInfo } from "@ums/protocol";
import type { CheckpointRecord, UnitRecord } from "../store/records.js";

/**
 * Spec 2.6 as the external API and a unit's internal API (spec 4.7) show a checkpoint; `present`:
 * whether it can be restored, its files on the unit's node or in the object store (`health` is
 * "mount_failed" otherwise); `local` (issue #15, shown with its copy's state): whether its files
 * are on the node itself.
 */
export function checkpointInfo(
  unit: UnitRecord,
  cp: CheckpointRecord,
  present: boolean,
  local?: boolean,
): CheckpointInfo {
  return {
    id: cp.id,
    create_time: cp.createdAt,
    comment: cp.comment,
    ...(cp.sourceId && { source_id: cp.sourceId }),
    health: present ? "" : "mount_failed",
    active: unit.activeCheckpoint === cp.id,
    is_auto: cp.auto,
    ...(cp.replica && local !== undefined && { local }),
    ...(cp.replica && {
      replication: {
        state: cp.replica.state,
        ...(cp.replica.bytes !== undefined && { bytes: cp.replica.bytes }),
        ...(cp.replica.parent && { parent_id: cp.replica.parent }),
        ...(cp.replica.error !== undefined && { error: cp.replica.error }),
        ...(cp.replica.at !== undefined && { time: cp.replica.at }),
      },
    }),
  };
}
