import type { CheckpointRecord } from "../../store/records.js";

/**
 * Issue #15 part 4, retention (docs/SCALE-OUT.md, "Retention"): which local snapshots a node may
 * delete once the object store holds them. Pure: the replicator reads the rows and the disk, and
 * deletes under the unit's lock.
 */

const stored = (c: CheckpointRecord) => c.replica?.state === "replicated";

/**
 * The checkpoint an export of `cp` is sent incrementally against: an earlier one of the unit that
 * is stored and on this node, the one the unit was on when `cp` was taken first, else the newest.
 * Null: a full stream.
 */
export function exportParent(
  rows: readonly CheckpointRecord[],
  cp: CheckpointRecord,
  isLocal: (id: string) => boolean,
): string | null {
  const usable = rows.filter((c) => c.seq < cp.seq && stored(c) && isLocal(c.id)).sort((a, b) => a.seq - b.seq);
  const source = usable.find((c) => c.id === cp.sourceId);
  return (source ?? usable[usable.length - 1])?.id ?? null;
}

export interface RetentionInput {
  /** The unit's checkpoint rows, in any order. */
  readonly rows: readonly CheckpointRecord[];
  /** `--local-checkpoints`: how many of the unit's newest checkpoints stay on the node whatever else. */
  readonly keep: number;
  /** The checkpoint the unit's files are on now (the source of its next checkpoint). */
  readonly active: string | null;
  /** Whether the checkpoint's snapshot is on this node. */
  readonly isLocal: (id: string) => boolean;
}

/**
 * The checkpoints whose local snapshots can go, oldest first: those on the node whose row says
 * the store holds them, except
 * - the unit's `keep` newest checkpoints (stored or not);
 * - the active one (the next checkpoint's source, so the parent of its copy);
 * - the newest stored one on the node (the parent of the next copy when the source is not);
 * - the parent each copy still to make (pending, failed) would be sent against.
 * A checkpoint the store does not hold is never among them: every checkpoint stays on the node
 * or in the store.
 */
export function evictable({ rows, keep, active, isLocal }: RetentionInput): string[] {
  if (!Number.isInteger(keep) || keep < 1) throw new RangeError(`keep must be a whole number >= 1, not ${keep}`);
  const bySeq = [...rows].sort((a, b) => a.seq - b.seq);
  const kept = new Set(bySeq.slice(-keep).map((c) => c.id));
  if (active) kept.add(active);
  const newestStored = bySeq.findLast((c) => stored(c) && isLocal(c.id));
  if (newestStored) kept.add(newestStored.id);
  for (const c of bySeq) {
    if (stored(c)) continue;
    const parent = exportParent(bySeq, c, isLocal);
    if (parent) kept.add(parent);
  }
  return bySeq.filter((c) => stored(c) && !kept.has(c.id) && isLocal(c.id)).map((c) => c.id);
}
