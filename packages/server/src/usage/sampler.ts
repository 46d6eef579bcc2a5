import type { Logger } from "pino";
import { metrics } from "../metrics/server-metrics.js";
import type { UsageSources } from "../runtime/runtime.js";
import type { UsageStore } from "../store/store.js";
import { KernelFiles } from "./kernel-files.js";
import { AVG_KEEP_MS, AVG_STEP_S, RAW_KEEP_MS, RAW_STEP_S, Rollup, type UsageSample } from "./sample.js";

/** What a unit pressed against (issue #17 hook for lifecycle events: "limit reached"). */
export type LimitKind = "memory" | "disk";
export type OnLimitReached = (unitId: string, kind: LimitKind) => void;

export interface SamplerDeps {
  readonly store: UsageStore;
  /** The units that run now (warm and cold units are not sampled: they use nothing). */
  readonly running: () => readonly string[];
  readonly sources: (unitId: string) => UsageSources | undefined;
  readonly log: Logger;
  /** 10 s by default; tests shorten it. */
  readonly intervalMs?: number;
}

/** A limit this high is no limit (cgroup v1 reports "none" as the largest page-aligned value). */
const NO_LIMIT = 2 ** 60;

interface Previous {
  at: number;
  cpuNs: number;
  rx: number;
  tx: number;
  failcnt: number;
  memoryHit: boolean;
  diskHit: boolean;
  sources: UsageSources;
}

/**
 * Samples every running unit every 10 s (issue #17): CPU, memory and pids from its cgroups, network
 * bytes from the host end of its veth, disk from its quota group. The reads are synchronous into one
 * buffer (KernelFiles): a pass over 200 units takes about a millisecond, which no promise chain
 * would. Raw samples are kept an hour, 5-minute averages 7 days (the store's `usage`).
 */
export class UsageSampler {
  private readonly files = new KernelFiles();
  private readonly prev = new Map<string, Previous>();
  private readonly rollup = new Rollup();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private lastPrune = Number.NEGATIVE_INFINITY;
  /** Told when a unit reaches its memory or disk limit (once per episode); the lead wires lifecycle events here. */
  onLimitReached: OnLimitReached = () => {};

  constructor(private readonly deps: SamplerDeps) {}

  get intervalMs(): number {
    return this.deps.intervalMs ?? RAW_STEP_S * 1000;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops sampling and waits for the last write. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.writing;
  }

  /** One pass: reads every running unit, then writes what it read (in the background, in order). */
  tick(now = Date.now()): void {
    const cpu0 = process.cpuUsage();
    const raw: { unitId: string; sample: UsageSample }[] = [];
    const averages: { unitId: string; sample: UsageSample }[] = [];
    const seen = new Set<string>();
    for (const unitId of this.deps.running()) {
      seen.add(unitId);
      const s = this.sampleUnit(unitId, now);
      if (!s) continue;
      raw.push({ unitId, sample: s });
      const avg = this.rollup.add(unitId, s);
      if (avg) averages.push({ unitId, sample: avg });
    }
    // Units that no longer run: their open 5-minute bucket is written now.
    for (const unitId of [...this.prev.keys()]) if (!seen.has(unitId)) this.prev.delete(unitId);
    for (const unitId of [...this.rollup.units()]) {
      if (seen.has(unitId)) continue;
      const avg = this.rollup.flush(unitId);
      if (avg) averages.push({ unitId, sample: avg });
    }
    const cpu = process.cpuUsage(cpu0);
    metrics.samplerCpuSeconds.inc((cpu.user + cpu.system) / 1e6);
    metrics.samplerUnits.set(seen.size);
    const prune = now - this.lastPrune >= AVG_STEP_S * 1000;
    if (prune) this.lastPrune = now;
    if (raw.length === 0 && averages.length === 0 && !prune) return;
    this.writing = this.writing
      .then(async () => {
        if (raw.length > 0) await this.deps.store.add(RAW_STEP_S, raw);
        if (averages.length > 0) await this.deps.store.add(AVG_STEP_S, averages);
        if (prune) {
          await this.deps.store.prune(RAW_STEP_S, now - RAW_KEEP_MS);
          await this.deps.store.prune(AVG_STEP_S, now - AVG_KEEP_MS);
        }
      })
      .catch((err: unknown) =>
        this.deps.log.warn({ err: err instanceof Error ? err.message : String(err) }, "could not store unit usage"),
      );
  }

  /** Reads one unit; undefined at its first sight (CPU and network need two readings) or when it went. */
  private sampleUnit(unitId: string, now: number): UsageSample | undefined {
    const f = this.files;
    const before = this.prev.get(unitId);
    const src = before?.sources ?? this.deps.sources(unitId);
    if (!src) return undefined;
    const cpuNs = f.number(`${src.cpuacct}/cpuacct.usage`);
    if (cpuNs === undefined || (before !== undefined && cpuNs < before.cpuNs)) {
      // Stopped since the list was taken, or booted again between two passes (its counters
      // started over, its link may be another): seen afresh at the next pass.
      this.prev.delete(unitId);
      return undefined;
    }
    const usage = f.number(`${src.memory}/memory.usage_in_bytes`) ?? 0;
    const inactive = f.read(`${src.memory}/memory.stat`) ? (f.field("total_inactive_file") ?? 0) : 0;
    const peak = f.number(`${src.memory}/memory.max_usage_in_bytes`) ?? usage;
    const limit = f.number(`${src.memory}/memory.limit_in_bytes`);
    // Every sign that the group ran out: failed charges of memory and of memory+swap (runc limits
    // both alike, and the one charged first fails), and the OOM kills in it (memory.oom_control's
    // oom_kill: on this host's kernel an OOM kill at the limit left both failcnt at 0).
    const oomKills = f.read(`${src.memory}/memory.oom_control`) ? (f.field("oom_kill") ?? 0) : 0;
    const failcnt =
      (f.number(`${src.memory}/memory.failcnt`) ?? 0) +
      (f.number(`${src.memory}/memory.memsw.failcnt`) ?? 0) +
      oomKills;
    const pids = f.number(`${src.pids}/pids.current`) ?? 0;
    // The host end's rx is what the unit sent.
    const rx = src.netStats ? (f.number(`${src.netStats}/tx_bytes`) ?? 0) : 0;
    const tx = src.netStats ? (f.number(`${src.netStats}/rx_bytes`) ?? 0) : 0;
    const disk = src.qgroup ? f.number(`${src.qgroup}/referenced`) : undefined;
    const diskMax = src.qgroup ? f.number(`${src.qgroup}/max_referenced`) : undefined;
    const memoryLimit = limit !== undefined && limit < NO_LIMIT ? limit : null;
    const diskLimit = diskMax !== undefined && diskMax > 0 && diskMax < NO_LIMIT ? diskMax : null;
    // A limit reached: the cgroup failed to charge memory since the last pass, or the group is full.
    const memoryHit = before !== undefined && failcnt > before.failcnt;
    const diskHit = disk !== undefined && diskLimit !== null && disk >= diskLimit;
    if (memoryHit && !before?.memoryHit) this.reached(unitId, "memory");
    if (diskHit && !before?.diskHit) this.reached(unitId, "disk");
    this.prev.set(unitId, { at: now, cpuNs, rx, tx, failcnt, memoryHit, diskHit, sources: src });
    if (!before || now <= before.at) return undefined;
    const secs = (now - before.at) / 1000;
    return {
      at: now,
      cpuCores: Math.max(0, cpuNs - before.cpuNs) / 1e9 / secs,
      memoryBytes: Math.max(0, usage - inactive),
      memoryPeakBytes: peak,
      memoryLimitBytes: memoryLimit,
      diskBytes: disk ?? null,
      diskLimitBytes: diskLimit,
      netRxBps: Math.max(0, rx - before.rx) / secs,
      netTxBps: Math.max(0, tx - before.tx) / secs,
      pids,
    };
  }

  private reached(unitId: string, kind: LimitKind): void {
    try {
      this.onLimitReached(unitId, kind);
    } catch (err) {
      this.deps.log.warn(
        { unitId, kind, err: err instanceof Error ? err.message : String(err) },
        "onLimitReached failed",
      );
    }
  }
}
