import type { NodeRecord } from "../../store/records.js";

/** How often a node writes its heartbeat; one that misses three in a row is down (placement.ts). */
export const HEARTBEAT_MS = 5_000;
export const DOWN_AFTER_MS = 3 * HEARTBEAT_MS;

/** Whether the node's last heartbeat is recent enough (at `now`, ms) for it to count as up. */
export function nodeIsUp(node: Pick<NodeRecord, "heartbeatAt">, now: number = Date.now()): boolean {
  return now - Date.parse(node.heartbeatAt) <= DOWN_AFTER_MS;
}

/**
 * `up` or `down` (nodeIsUp at `now`), with the operator's state when it is not `active`: `up`,
 * `down`, `up, cordoned`, `down, cordoned`. The STATUS column of `ums node list` and a node's
 * `status` in the API (GET /v1/nodes).
 */
export function nodeStatus(node: Pick<NodeRecord, "heartbeatAt" | "state">, now: number = Date.now()): string {
  const word = nodeIsUp(node, now) ? "up" : "down";
  return node.state === "active" ? word : `${word}, ${node.state}`;
}
