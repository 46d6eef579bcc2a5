/**
 * Issue #20 part 5, limits on callers: token buckets (one per key: a token, an organization), in
 * memory, for one server. A bucket holds up to `burst` requests and refills at `perSecond`; a
 * request that finds it empty is refused with the seconds until one is back (RFC 9110 §10.2.3,
 * Retry-After; RFC 6585 §4, 429).
 */
export interface RateLimit {
  /** Sustained requests per second; 0: no limit. */
  readonly perSecond: number;
  /** Requests that may come at once after a quiet time. */
  readonly burst: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Buckets kept at most; beyond, full ones (keys quiet long enough) are dropped first. */
const MAX_KEYS = 10_000;

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(readonly limit: RateLimit) {}

  /** Takes one request for `key`: 0 when allowed, else the whole seconds to wait (≥ 1). */
  take(key: string, now = Date.now()): number {
    const { perSecond, burst } = this.limit;
    if (perSecond <= 0) return 0;
    const b = this.buckets.get(key) ?? { tokens: burst, at: now };
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * perSecond);
    b.at = now;
    if (!this.buckets.has(key)) {
      if (this.buckets.size >= MAX_KEYS) this.prune(now);
      this.buckets.set(key, b);
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / perSecond));
  }

  get size(): number {
    return this.buckets.size;
  }

  private prune(now: number): void {
    const { perSecond, burst } = this.limit;
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * perSecond >= burst) this.buckets.delete(key);
    }
    // Still full of busy keys: the oldest go (a dropped key starts again with a full bucket).
    for (const key of this.buckets.keys()) {
      if (this.buckets.size < MAX_KEYS) break;
      this.buckets.delete(key);
    }
  }
}

/** `N` or `N/s` (per second), `N/m` (per minute), `off`/`0`: no limit; the burst is 10 s worth (at least 10). */
export function parseRateLimit(text: string): RateLimit | undefined {
  const v = text.trim().toLowerCase();
  if (v === "off" || v === "0") return { perSecond: 0, burst: 0 };
  const m = /^(\d+(?:\.\d+)?)(?:\/(s|m))?$/.exec(v);
  if (!m) return undefined;
  const n = Number(m[1]);
  const perSecond = m[2] === "m" ? n / 60 : n;
  if (!(perSecond > 0) || perSecond > 1e6) return undefined;
  return { perSecond, burst: Math.max(10, Math.ceil(perSecond * 10)) };
}
