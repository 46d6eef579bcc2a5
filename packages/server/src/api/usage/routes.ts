import { Type } from "@sinclair/typebox";
import { ErrorBody, UnitUsage, type UnitUsageSample } from "@ums/protocol";
import type { Store } from "../../store/store.js";
import { USAGE_WINDOWS, type UsageSample, type UsageWindow } from "../../usage/sample.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";

export interface UsageRouteDeps {
  readonly units: UnitService;
  readonly store: Store;
  /** Whether the server samples units (off with --no-metrics). */
  readonly sampling: boolean;
}

export function presentSample(s: UsageSample): UnitUsageSample {
  return {
    at: new Date(s.at).toISOString(),
    cpu_cores: Math.round(s.cpuCores * 10_000) / 10_000,
    memory_bytes: s.memoryBytes,
    memory_peak_bytes: s.memoryPeakBytes,
    memory_limit_bytes: s.memoryLimitBytes,
    disk_bytes: s.diskBytes,
    disk_limit_bytes: s.diskLimitBytes,
    net_rx_bytes_per_second: Math.round(s.netRxBps),
    net_tx_bytes_per_second: Math.round(s.netTxBps),
    processes: Math.round(s.pids * 10) / 10,
  };
}

/** Issue #17: a unit's usage history (sampled while it runs; usage/sampler.ts). */
export function usageRoutes(app: ApiInstance, { units, store, sampling }: UsageRouteDeps): void {
  app.get(
    "/:name/metrics",
    {
      schema: {
        tags: ["units"],
        summary:
          "The unit's usage: CPU, memory, disk, network and processes, every 10 s over the last hour (window=1h, the default) or as 5-minute averages (24h, 7d); only intervals it ran",
        params: UnitParams,
        querystring: Type.Object(
          { window: Type.Optional(Type.String({ maxLength: 16, description: "1h (default), 24h or 7d" })) },
          { additionalProperties: false },
        ),
        response: { 200: UnitUsage, ...commonErrors, 404: ErrorBody },
      },
    },
    async (req) => {
      const name = req.query.window ?? "1h";
      if (!Object.hasOwn(USAGE_WINDOWS, name)) {
        throw ApiError.validation([`window: must be 1h, 24h or 7d; got '${name}'`]);
      }
      const window = name as UsageWindow;
      const unit = await units.require(req.auth.org, req.params.name);
      const { ms, step } = USAGE_WINDOWS[window];
      const samples = await store.usage.list(unit.id, step, Date.now() - ms);
      return { unit: unit.name, window, step_seconds: step, sampling, samples: samples.map(presentSample) };
    },
  );
}
