/** A seeded pseudo-random source (mulberry32): the same seed replays the same choices. */
export class Rng {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }
  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T | undefined {
    return items.length ? items[Math.floor(this.next() * items.length)] : undefined;
  }
  /** A key of `weights` drawn in proportion to its weight (weights of 0 are never drawn). */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K | undefined {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + Math.max(0, w), 0);
    let x = this.next() * total;
    for (const [k, w] of entries) {
      if (w <= 0) continue;
      x -= w;
      if (x < 0) return k;
    }
    return undefined;
  }
}

/** `Math.random`'s shape over an `Rng` of `seed`: the same draws every run (tests, benches). */
export function seededRandom(seed: number): () => number {
  const rng = new Rng(seed);
  return () => rng.next();
}

/** A fresh seed when none is given (printed, so a run can be replayed with --seed). */
export const newSeed = (): number => Math.floor(Math.random() * 2 ** 31);

/**
 * The seed a suite test runs with: a fixed one, so that CI replays a run known to pass and a failure
 * there is a regression rather than a new draw; `env` names another seed, or `random` for a new draw
 * (as bench/soak.mjs always does).
 */
export function suiteSeed(env: string | undefined, fixed: number): number {
  if (env === "random") return newSeed();
  const n = Number(env);
  return env && Number.isInteger(n) && n > 0 ? n : fixed;
}
