import type { NodeRecord } from "../../store/records.js";

/**
 * Issue #15 part 3: which node gets a unit, as a pure function of what the database says
 * (docs/SCALE-OUT.md "Placement"). Two steps:
 *
 * 1. **Filter.** A node can take the unit when it is `active` (not cordoned or draining), up (its
 *    last heartbeat is younger than `downAfterMs`), reachable from this API process, has every
 *    label the request asks for (`key=value`, exact), has a unit slot left (when it counts them),
 *    and has at least `MIN_FREE_MEMORY` memory and the request's disk (at least `MIN_FREE_DISK`)
 *    free at its last heartbeat.
 * 2. **Score, best of two.** Each node that can is scored by what it has free (the mean of its
 *    free fractions of unit slots, memory and disk, 0..1) less a spread term (`SPREAD_WEIGHT`
 *    times its count of the organization's units over the most any node has). Two are drawn at
 *    random and the better one wins ("the power of two choices"): loads stay even, and API
 *    replicas placing at once from the same view do not all pick the same node, as "always the
 *    best" would make them.
 */
export interface PlacementCandidate {
  readonly node: NodeRecord;
  /** Units the node holds (all organizations). */
  readonly units: number;
  /** Of those, the organization's. */
  readonly orgUnits: number;
  /** Whether this API process can reach the node. */
  readonly reachable: boolean;
  /**
   * The node in this process (`--role all`): up while this process answers, whatever its
   * heartbeat's age. Its heartbeat is a timer of this very process, and a late one says only that
   * the process was busy (seen: a fork bomb's kill held it past DOWN_AFTER_MS, and creates failed).
   */
  readonly local?: boolean;
}

export interface PlacementRequest {
  /** Labels the node must have, each with this value. */
  readonly labels?: Readonly<Record<string, string>>;
  /** Disk the unit may fill (its quota); the node must have this much free, or `MIN_FREE_DISK`. */
  readonly diskBytes?: number;
  /** Now, in ms since the epoch. */
  readonly now: number;
  /** A node whose last heartbeat is older than this is down. */
  readonly downAfterMs: number;
}

export type Placement =
  | { readonly ok: true; readonly node: NodeRecord; readonly score: number }
  | { readonly ok: false; readonly reason: string };

/** A node with less memory free takes no new unit: booting one could push the host into its OOM killer. */
export const MIN_FREE_MEMORY = 256 * 1024 * 1024;
/** A node with less disk free takes no new unit. */
export const MIN_FREE_DISK = 1024 * 1024 * 1024;
/** How much holding all of an organization's units weighs against a node (free capacity weighs 0..1). */
export const SPREAD_WEIGHT = 0.5;
/** Candidates drawn per decision. */
export const CHOICES = 2;

type Excluded = "down" | "cordoned" | "draining" | "unreachable" | "labels" | "slots" | "memory" | "disk";

const WHY: Record<Excluded, string> = {
  down: "down (no heartbeat)",
  cordoned: "cordoned",
  draining: "draining",
  unreachable: "not reachable from this API process",
  labels: "without the labels asked for",
  slots: "full (no unit slot left)",
  memory: "short of memory",
  disk: "short of disk",
};

/** Why `c` cannot take the unit, or undefined when it can. */
export function excluded(c: PlacementCandidate, req: PlacementRequest): Excluded | undefined {
  const { node } = c;
  if (!c.local && !(req.now - Date.parse(node.heartbeatAt) <= req.downAfterMs)) return "down"; // an unreadable time too
  if (node.state !== "active") return node.state;
  if (!c.reachable) return "unreachable";
  for (const [k, v] of Object.entries(req.labels ?? {})) if (node.labels[k] !== v) return "labels";
  if (node.capacity.unitSlots !== null && c.units >= node.capacity.unitSlots) return "slots";
  if (node.free.memoryBytes < MIN_FREE_MEMORY) return "memory";
  if (node.free.diskBytes < Math.max(MIN_FREE_DISK, req.diskBytes ?? 0)) return "disk";
  return undefined;
}

const fraction = (free: number, all: number) => (all > 0 ? Math.min(1, Math.max(0, free / all)) : 0);

/**
 * The candidate's score, higher is better: free capacity (0..1) less the spread term, which is
 * `SPREAD_WEIGHT` for the node(s) with the most of the organization's units (`mostOrgUnits`) and
 * less for the others in proportion.
 */
export function score(c: PlacementCandidate, mostOrgUnits: number): number {
  const { capacity, free } = c.node;
  const slots = capacity.unitSlots === null ? 1 : fraction(capacity.unitSlots - c.units, capacity.unitSlots);
  const room =
    (slots + fraction(free.memoryBytes, capacity.memoryBytes) + fraction(free.diskBytes, capacity.diskBytes)) / 3;
  return room - SPREAD_WEIGHT * (mostOrgUnits > 0 ? c.orgUnits / mostOrgUnits : 0);
}

/** `random` returns [0, 1) like Math.random (tests seed it). */
export function place(
  candidates: readonly PlacementCandidate[],
  req: PlacementRequest,
  random: () => number = Math.random,
): Placement {
  const able: PlacementCandidate[] = [];
  const tally = new Map<Excluded, number>();
  for (const c of candidates) {
    const why = excluded(c, req);
    if (why === undefined) able.push(c);
    else tally.set(why, (tally.get(why) ?? 0) + 1);
  }
  if (able.length === 0) {
    if (candidates.length === 0) return { ok: false, reason: "no node is registered" };
    const parts = [...tally].map(([why, n]) => `${n} ${n === 1 ? "is" : "are"} ${WHY[why]}`);
    return {
      ok: false,
      reason: `no node can take the unit: of ${candidates.length} node${candidates.length === 1 ? "" : "s"}, ${parts.join(", ")}`,
    };
  }
  const mostOrgUnits = able.reduce((n, c) => Math.max(n, c.orgUnits), 0);
  // Draw CHOICES distinct candidates (a partial Fisher-Yates shuffle), keep the best scored.
  const pool = [...able];
  let best: { c: PlacementCandidate; s: number } | undefined;
  for (let i = 0; i < Math.min(CHOICES, pool.length); i++) {
    const j = i + Math.floor(random() * (pool.length - i));
    const c = pool[j] as PlacementCandidate;
    pool[j] = pool[i] as PlacementCandidate;
    pool[i] = c;
    const s = score(c, mostOrgUnits);
    if (!best || s > best.s) best = { c, s }; // a tie keeps the first drawn: random, not by name
  }
  const chosen = best as { c: PlacementCandidate; s: number };
  return { ok: true, node: chosen.c.node, score: chosen.s };
}
