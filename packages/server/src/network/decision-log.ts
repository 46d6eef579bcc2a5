import type { NetworkDecision } from "@ums/protocol";

/**
 * The resolver's recent decisions for one unit (issue #6 observability): a bounded ring, oldest
 * dropped first, plus the number of lookups refused. In memory: it starts empty with the server.
 */
export class DecisionLog {
  private readonly entries: NetworkDecision[] = [];
  private start = 0;
  deniedLookups = 0;

  constructor(private readonly capacity = 500) {}

  add(d: NetworkDecision): void {
    if (d.verdict === "denied") this.deniedLookups++;
    if (this.entries.length < this.capacity) this.entries.push(d);
    else {
      this.entries[this.start] = d;
      this.start = (this.start + 1) % this.capacity;
    }
  }

  /** The last `limit` decisions, oldest first. */
  recent(limit: number): NetworkDecision[] {
    const ordered = [...this.entries.slice(this.start), ...this.entries.slice(0, this.start)];
    return ordered.slice(Math.max(0, ordered.length - limit));
  }
}
