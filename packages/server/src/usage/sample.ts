/** One unit's usage over one interval (issue #17): what the store keeps and the API shows. */
export interface UsageSample {
  /** The interval's end (ms since the epoch); for an average, its bucket's start. */
  readonly at: number;
  /** CPU used over the interval, in cores (1.0: one core busy all the time). */
  readonly cpuCores: number;
  /** Memory in use: the cgroup's usage less its inactive file cache (the working set), bytes. */
  readonly memoryBytes: number;
  /** The most the cgroup used since it booted, bytes. */
  readonly memoryPeakBytes: number;
  /** Its memory limit; null when it has none. */
  readonly memoryLimitBytes: number | null;
  /** What its quota group is charged (what it wrote, checkpoints included); null without quotas. */
  readonly diskBytes: number | null;
  readonly diskLimitBytes: number | null;
  /** Network bytes per second into and out of the unit over the interval. */
  readonly netRxBps: number;
  readonly netTxBps: number;
  /** Processes and threads. */
  readonly pids: number;
}

/** The raw 10 s samples are kept an hour; averages over 5 minutes, 7 days. */
export const RAW_STEP_S = 10;
export const AVG_STEP_S = 300;
export const RAW_KEEP_MS = 3_600_000;
export const AVG_KEEP_MS = 7 * 86_400_000;

export type UsageWindow = "1h" | "24h" | "7d";
export const USAGE_WINDOWS: Readonly<Record<UsageWindow, { readonly ms: number; readonly step: number }>> = {
  "1h": { ms: 3_600_000, step: RAW_STEP_S },
  "24h": { ms: 86_400_000, step: AVG_STEP_S },
  "7d": { ms: 7 * 86_400_000, step: AVG_STEP_S },
};

/**
 * Averages a unit's samples of one bucket: means of the measures, the highest peak, the last
 * limits. Pure; `at` is the bucket's start.
 */
export function averageSamples(at: number, samples: readonly UsageSample[]): UsageSample {
  const n = samples.length;
  if (n === 0) throw new Error("no samples to average");
  let cpu = 0;
  let mem = 0;
  let peak = 0;
  let disk = 0;
  let diskN = 0;
  let rx = 0;
  let tx = 0;
  let pids = 0;
  for (const s of samples) {
    cpu += s.cpuCores;
    mem += s.memoryBytes;
    peak = Math.max(peak, s.memoryPeakBytes);
    if (s.diskBytes !== null) {
      disk += s.diskBytes;
      diskN++;
    }
    rx += s.netRxBps;
    tx += s.netTxBps;
    pids += s.pids;
  }
  const last = samples[n - 1] as UsageSample;
  return {
    at,
    cpuCores: cpu / n,
    memoryBytes: Math.round(mem / n),
    memoryPeakBytes: peak,
    memoryLimitBytes: last.memoryLimitBytes,
    diskBytes: diskN > 0 ? Math.round(disk / diskN) : null,
    diskLimitBytes: last.diskLimitBytes,
    netRxBps: rx / n,
    netTxBps: tx / n,
    pids: pids / n,
  };
}

/**
 * Collects each unit's raw samples into 5-minute buckets and hands out a bucket's average once
 * the bucket is over (a sample of a later bucket arrived, or `flush` says the unit stopped).
 */
export class Rollup {
  private readonly open = new Map<string, { bucket: number; samples: UsageSample[] }>();

  constructor(private readonly stepMs = AVG_STEP_S * 1000) {}

  /** Adds a sample; returns the average of the unit's previous bucket when this one starts a new bucket. */
  add(unitId: string, s: UsageSample): UsageSample | undefined {
    const bucket = Math.floor(s.at / this.stepMs) * this.stepMs;
    const cur = this.open.get(unitId);
    if (!cur) {
      this.open.set(unitId, { bucket, samples: [s] });
      return undefined;
    }
    if (cur.bucket === bucket) {
      cur.samples.push(s);
      return undefined;
    }
    const done = averageSamples(cur.bucket, cur.samples);
    this.open.set(unitId, { bucket, samples: [s] });
    return done;
  }

  /** The average of the unit's open bucket (it stopped), if it has one. */
  flush(unitId: string): UsageSample | undefined {
    const cur = this.open.get(unitId);
    if (!cur) return undefined;
    this.open.delete(unitId);
    return averageSamples(cur.bucket, cur.samples);
  }

  units(): IterableIterator<string> {
    return this.open.keys();
  }
}
