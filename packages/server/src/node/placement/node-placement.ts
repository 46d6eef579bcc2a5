import type { NodeRecord, OrgRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { NoNodeError } from "../errors.js";
import { DOWN_AFTER_MS } from "../registry/liveness.js";
import { excluded, type PlacementCandidate, place } from "./placement.js";

export interface PlaceOpts {
  /** Labels the node must have (placement.ts). */
  readonly labels?: Readonly<Record<string, string>>;
  /** The unit's data is on this node (a fork's source, say): it goes there or nowhere. */
  readonly on?: string | null;
  /** Any node but this one (a move's target, issue #15). */
  readonly not?: string | null;
}

/**
 * How old a list of the nodes placement may use on PostgreSQL (issue #16 part 7: a round trip less
 * per create). A write through this process's store (a cordon over the API, a heartbeat) drops it
 * at once; one from another process (`ums node cordon` on another host) is seen within this time.
 */
const NODES_MAX_AGE_MS = 1_000;

/**
 * Issue #15 part 3: chooses the node of a new unit from the database's view of the nodes
 * (placement.ts has the rule). Until API processes reach nodes over the network, only the node in
 * this process is reachable.
 */
export class NodePlacement {
  constructor(
    private readonly store: Store,
    /** Whether this API process can reach the node. */
    private readonly reachable: (node: NodeRecord) => boolean,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
    /** The id of the node in this process, if any (PlacementCandidate.local). */
    private readonly localId?: string,
  ) {}

  /** The id of the node the organization's new unit goes to; `NoNodeError` says why none can take it. */
  async choose(org: OrgRecord, opts: PlaceOpts = {}): Promise<string> {
    const req = { now: this.now(), downAfterMs: DOWN_AFTER_MS, ...(opts.labels && { labels: opts.labels }) };
    const only = this.onlyChoice(await this.store.nodes.list({ maxAgeMs: NODES_MAX_AGE_MS }), opts, req);
    if (only) return only;
    const all = await this.store.nodes.usage(org.id);
    const nodes = (opts.on ? all.filter((u) => u.node.id === opts.on) : all).filter((u) => u.node.id !== opts.not);
    const r = place(
      nodes.map((u) => this.candidate(u.node, u.units, u.orgUnits)),
      req,
      this.random,
    );
    if (r.ok) return r.node.id;
    if (opts.on && nodes.length === 0)
      throw new NoNodeError(`the node that holds the unit's data is gone (${opts.on})`);
    throw new NoNodeError(
      `${r.reason}${opts.on ? " (the unit's data is on that node alone)" : ""}; nothing was created: try again later`,
    );
  }

  /** `node` as placement sees it from this process: whether it reaches it, whether it is its own. */
  private candidate(node: NodeRecord, units: number, orgUnits: number): PlacementCandidate {
    return { node, units, orgUnits, reachable: this.reachable(node), local: node.id === this.localId };
  }

  /**
   * The node when one alone can take the unit whatever the unit counts are (it does not count unit
   * slots, issue #16 part 7): counting every unit per node is a pass over all units (10,000 on a
   * host cost a create several ms), and with one candidate neither the slots filter nor the score
   * can change the choice. Undefined when the counts are needed.
   */
  private onlyChoice(
    listed: readonly NodeRecord[],
    opts: PlaceOpts,
    req: Parameters<typeof excluded>[1],
  ): string | undefined {
    const able = listed.filter(
      (node) =>
        (!opts.on || node.id === opts.on) &&
        node.id !== opts.not &&
        excluded(this.candidate(node, 0, 0), req) === undefined,
    );
    const [node] = able;
    return able.length === 1 && node && node.capacity.unitSlots === null ? node.id : undefined;
  }
}
