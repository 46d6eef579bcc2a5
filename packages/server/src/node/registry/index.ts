/** Issue #15: the nodes of a database, for the host-admin CLI (`ums node`). */

export type { NodeRecord, NodeState } from "../../store/records.js";
export { NodeInUseError } from "../../store/store.js";
export { DOWN_AFTER_MS, HEARTBEAT_MS, nodeIsUp } from "./liveness.js";
