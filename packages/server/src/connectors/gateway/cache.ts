/**
 * A short-lived read cache for the gateway's per-request lookups (the calling unit, the
 * connector, its opened secret). Writes through this server drop their entry at once; a change
 * made by another server sharing the database shows within `ttlMs`.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly max = 10_000,
  ) {}

  async get(key: string, load: () => Promise<V>): Promise<V> {
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && hit.until > now) return hit.value;
    const value = await load();
    if (this.entries.size >= this.max) this.entries.clear();
    this.entries.set(key, { value, until: now + this.ttlMs });
    return value;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
