import type { NodeRecord } from "../../store/records.js";

/** How often a node writes its heartbeat; one that misses three in a row is down (placement.ts). */
export const HEARTBEAT_MS = 5_000;
export const DOWN_AFTER_MS = 3 * HEARTBEAT_MS;

/** Whether the node's last heartbeat is recent enough (at `now`, ms) for it to count as up. */
export function nodeIsUp(node: Pick<NodeRecord, "heartbeatAt">, now: number = Date.now()): boolean {
  return now - Date.parse(node.heartbeatAt) <= DOWN_AFTER_MS;
}
