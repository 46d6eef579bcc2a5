import { type Static, Type } from "@sinclair/typebox";

/** Issue #17: the windows a unit's usage history is asked for. */
export const UsageWindowName = Type.Union([Type.Literal("1h"), Type.Literal("24h"), Type.Literal("7d")], {
  description: "1h: samples every 10 s; 24h and 7d: 5-minute averages",
});
export type UsageWindowName = Static<typeof UsageWindowName>;

const Bytes = (description: string) => Type.Number({ description });
const MaybeBytes = (description: string) => Type.Union([Type.Number(), Type.Null()], { description });

export const UnitUsageSample = Type.Object(
  {
    at: Type.String({
      format: "date-time",
      description: "End of the interval (10 s) or start of the 5-minute average",
    }),
    cpu_cores: Type.Number({ description: "CPU used, in cores (1: one core busy)" }),
    memory_bytes: Bytes("Memory in use (the cgroup's usage less its inactive file cache)"),
    memory_peak_bytes: Bytes("The most memory used since the unit booted"),
    memory_limit_bytes: MaybeBytes("The memory limit; null: none"),
    disk_bytes: MaybeBytes("What the unit wrote (its quota group's charge, checkpoints included); null: quotas off"),
    disk_limit_bytes: MaybeBytes("Its disk size; null: none"),
    net_rx_bytes_per_second: Type.Number({ description: "Network bytes into the unit per second" }),
    net_tx_bytes_per_second: Type.Number({ description: "Network bytes out of the unit per second" }),
    processes: Type.Number({ description: "Processes and threads (an average in 5-minute samples)" }),
  },
  { title: "UnitUsageSample" },
);
export type UnitUsageSample = Static<typeof UnitUsageSample>;

export const UnitUsage = Type.Object(
  {
    unit: Type.String(),
    window: UsageWindowName,
    step_seconds: Type.Integer({ description: "Seconds between samples: 10 or 300" }),
    sampling: Type.Boolean({ description: "Whether this server samples units now (off with --no-metrics)" }),
    samples: Type.Array(UnitUsageSample, { description: "Oldest first; only intervals the unit ran" }),
  },
  { title: "UnitUsage" },
);
export type UnitUsage = Static<typeof UnitUsage>;
