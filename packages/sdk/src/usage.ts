import type { UnitUsage as WireUnitUsage, UnitUsageSample as WireUsageSample } from "@ums/protocol";

/** The windows a unit's usage history covers: 1h (a sample every 10 s), 24h and 7d (5-minute averages). */
export type UsageWindow = "1h" | "24h" | "7d";

/** One interval of a unit's usage. Bytes are bytes; rates are per second. */
export interface UsageSample {
  readonly at: Date;
  readonly cpuCores: number;
  readonly memoryBytes: number;
  readonly memoryPeakBytes: number;
  readonly memoryLimitBytes: number | null;
  readonly diskBytes: number | null;
  readonly diskLimitBytes: number | null;
  readonly netRxBytesPerSecond: number;
  readonly netTxBytesPerSecond: number;
  readonly processes: number;
}

/** `unit.metrics()`: what the unit used while it ran (issue #17). */
export interface UnitUsage {
  readonly unit: string;
  readonly window: UsageWindow;
  readonly stepSeconds: number;
  /** Whether the server samples units (a server run with --no-metrics does not). */
  readonly sampling: boolean;
  /** Oldest first. */
  readonly samples: readonly UsageSample[];
}

function sampleFromWire(s: WireUsageSample): UsageSample {
  return {
    at: new Date(s.at),
    cpuCores: s.cpu_cores,
    memoryBytes: s.memory_bytes,
    memoryPeakBytes: s.memory_peak_bytes,
    memoryLimitBytes: s.memory_limit_bytes,
    diskBytes: s.disk_bytes,
    diskLimitBytes: s.disk_limit_bytes,
    netRxBytesPerSecond: s.net_rx_bytes_per_second,
    netTxBytesPerSecond: s.net_tx_bytes_per_second,
    processes: s.processes,
  };
}

export function usageFromWire(u: WireUnitUsage): UnitUsage {
  return {
    unit: u.unit,
    window: u.window,
    stepSeconds: u.step_seconds,
    sampling: u.sampling,
    samples: u.samples.map(sampleFromWire),
  };
}
