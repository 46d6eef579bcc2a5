/** Issue #15: the nodes of a database, for the host-admin CLI (`ums node`). */

export type { NodeRecord, NodeState } from "../../store/records.js";
export { NodeInUseError } from "../../store/store.js";
export { NodeDirectory } from "../directory.js";
export { type MovePlan, moveUnit } from "../move.js";
export { NodePlacement } from "../placement/node-placement.js";
export { newestStored, rehomeUnit } from "../rehome.js";
export { DOWN_AFTER_MS, HEARTBEAT_MS, nodeIsUp, nodeStatus } from "./liveness.js";
