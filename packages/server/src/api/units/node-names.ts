import type { Store } from "../../store/store.js";

/** How long a node's name is taken as read: a node renamed at its restart shows the new one within this. */
export const NODE_NAME_TTL_MS = 10_000;

/**
 * The names of nodes, for the `node` field of units the API answers (issue #15), read once for all
 * nodes and kept for {@link NODE_NAME_TTL_MS}: a unit's answer (GET, a create, a list page) no longer
 * waits for a read of the nodes table each time (issue #16 part 7). An id not known (a node that
 * registered since) reads them again.
 */
export class NodeNames {
  private names = new Map<string, string>();
  private readAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly store: Pick<Store, "nodes">,
    private readonly now: () => number = Date.now,
  ) {}

  /** The names of these nodes (those that exist). */
  async of(ids: Iterable<string>): Promise<ReadonlyMap<string, string>> {
    const wanted = [...new Set(ids)];
    if (wanted.length === 0) return this.names;
    const fresh = this.now() - this.readAt < NODE_NAME_TTL_MS;
    if (!fresh || wanted.some((id) => !this.names.has(id))) await this.read();
    return this.names;
  }

  /** One node's name, if it exists. */
  async name(id: string): Promise<string | undefined> {
    return (await this.of([id])).get(id);
  }

  /** Reads every node's name; concurrent callers share one read. */
  private read(): Promise<void> {
    this.reading ??= (async () => {
      const at = this.now();
      try {
        const rows = await this.store.nodes.list();
        this.names = new Map(rows.map((n) => [n.id, n.name]));
        this.readAt = at;
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }
}
