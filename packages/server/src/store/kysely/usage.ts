import type { Kysely } from "kysely";
import type { UsageSample } from "../../usage/sample.js";
import type { UsageStore } from "../store.js";
import type { Database, UnitUsageTable } from "./schema.js";

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

function fromRow(r: UnitUsageTable): UsageSample {
  return {
    at: Number(r.at),
    cpuCores: Number(r.cpu_cores),
    memoryBytes: Number(r.memory_bytes),
    memoryPeakBytes: Number(r.memory_peak_bytes),
    memoryLimitBytes: num(r.memory_limit_bytes),
    diskBytes: num(r.disk_bytes),
    diskLimitBytes: num(r.disk_limit_bytes),
    netRxBps: Number(r.net_rx_bps),
    netTxBps: Number(r.net_tx_bps),
    pids: Number(r.pids),
  };
}

/** Rows per insert: far below either database's limit of bound parameters. */
const CHUNK = 400;

/** Issue #17: units' usage samples. */
export function usageStore(db: Kysely<Database>): UsageStore {
  return {
    async add(step, rows) {
      for (let i = 0; i < rows.length; i += CHUNK) {
        await db
          .insertInto("unit_usage")
          .values(
            rows.slice(i, i + CHUNK).map(({ unitId, sample: s }) => ({
              unit_id: unitId,
              step,
              at: s.at,
              cpu_cores: s.cpuCores,
              memory_bytes: s.memoryBytes,
              memory_peak_bytes: s.memoryPeakBytes,
              memory_limit_bytes: s.memoryLimitBytes,
              disk_bytes: s.diskBytes,
              disk_limit_bytes: s.diskLimitBytes,
              net_rx_bps: s.netRxBps,
              net_tx_bps: s.netTxBps,
              pids: s.pids,
            })),
          )
          .execute();
      }
    },
    async list(unitId, step, since) {
      const rows = await db
        .selectFrom("unit_usage")
        .selectAll()
        .where("unit_id", "=", unitId)
        .where("step", "=", step)
        .where("at", ">=", since)
        .orderBy("at", "asc")
        .execute();
      return rows.map(fromRow);
    },
    async prune(step, before) {
      const r = await db.deleteFrom("unit_usage").where("step", "=", step).where("at", "<", before).executeTakeFirst();
      return Number(r.numDeletedRows);
    },
  };
}
