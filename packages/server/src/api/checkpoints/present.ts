import type { CheckpointInfo } from "@ums/protocol";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { CheckpointRecord, UnitRecord } from "../../store/records.js";

/** Spec 2.6 as the external and internal APIs show it. */
export function checkpointInfo(runtime: UnitRuntime, unit: UnitRecord, cp: CheckpointRecord): CheckpointInfo {
  return {
    id: cp.id,
    create_time: cp.createdAt,
    comment: cp.comment,
    ...(cp.sourceId && { source_id: cp.sourceId }),
    health: runtime.hasCheckpoint(unit.id, cp.id) ? "" : "mount_failed",
    active: unit.activeCheckpoint === cp.id,
  };
}
