// Counts and latencies of the soak's operations, and its findings (violations), for the report.

export type Outcome =
  /** Acknowledged as asked. */
  | "ok"
  /** A documented refusal (e.g. 409 for deleting the active checkpoint). */
  | "expected"
  /** Cut short by a kill of the server or of the unit's agent or PID 1 (chaos). */
  | "interrupted"
  /** Anything else: a violation. */
  | "error";

export interface KindStats {
  count: number;
  ok: number;
  /** Latencies of acknowledged operations (ms). */
  readonly ms: number[];
  /** Non-ok outcomes by `outcome status/code`. */
  readonly errors: Map<string, number>;
}

export class Stats {
  readonly kinds = new Map<string, KindStats>();
  readonly violations: string[] = [];
  /** Acknowledged facts found missing later (chaos: "operations lost"). */
  lost = 0;

  private kind(name: string): KindStats {
    let k = this.kinds.get(name);
    if (!k) {
      k = { count: 0, ok: 0, ms: [], errors: new Map() };
      this.kinds.set(name, k);
    }
    return k;
  }

  record(kind: string, outcome: Outcome, ms: number, detail = ""): void {
    const k = this.kind(kind);
    k.count++;
    if (outcome === "ok") {
      k.ok++;
      k.ms.push(ms);
      return;
    }
    const key = `${outcome}${detail ? ` ${detail}` : ""}`;
    k.errors.set(key, (k.errors.get(key) ?? 0) + 1);
  }

  violation(what: string): void {
    this.violations.push(`${new Date().toISOString()} ${what}`);
  }

  /** Errors of every kind by outcome and detail, summed over kinds. */
  errorsBy(outcome: Outcome): Map<string, number> {
    const out = new Map<string, number>();
    for (const [name, k] of this.kinds)
      for (const [key, n] of k.errors)
        if (key.startsWith(outcome)) out.set(`${name}: ${key}`, (out.get(`${name}: ${key}`) ?? 0) + n);
    return out;
  }
}

export function percentile(samples: readonly number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

/** Least-squares slope of `points` ([x, y]) in y per x; 0 with fewer than two points. */
export function slope(points: readonly (readonly [number, number])[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den ? num / den : 0;
}
