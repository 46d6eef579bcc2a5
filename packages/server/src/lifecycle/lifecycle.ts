import type { Logger } from "pino";
import { agentHealth } from "../runtime/agent-client.js";
import type { BootSpec, UnitRuntime } from "../runtime/runtime.js";
import type { OrgRecord, UnitRecord, UnitStatus } from "../store/records.js";
import type { Store } from "../store/store.js";
import { Activity } from "./activity.js";
import { KeyedMutex } from "./keyed-mutex.js";
import { WorkQueue } from "./work-queue.js";

export interface LifecycleConfig {
  /** Idle running units are paused (warm) after this long. */
  readonly idleWarmMs: number;
  /** Warm units are stopped (cold) after this long warm. */
  readonly idleColdMs: number;
  /** How often idleness is checked. */
  readonly sweepMs: number;
  /** CPU use (fraction of one core) above which a unit counts as busy even with nothing attached. */
  readonly busyCpu: number;
}

export class RunningLimitError extends Error {}

interface Tracked {
  orgId: string;
  name: string;
  status: UnitStatus;
  /** When the unit entered its current status (ms). */
  since: number;
  cpuNs?: number;
  cpuAt?: number;
}

/**
 * Unit lifecycle (DESIGN.md section 3): cold → running on demand, running → warm when idle,
 * warm → cold after longer idleness; limits per organization; re-adoption after a restart.
 */
export class Lifecycle {
  readonly activity = new Activity();
  private readonly mutex = new KeyedMutex();
  /** Disk snapshots run in the background, two at a time. */
  private readonly disks = new WorkQueue(2);
  private readonly tracked = new Map<string, Tracked>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping = false;

  constructor(
    private readonly store: Store,
    private readonly runtime: UnitRuntime,
    private readonly cfg: LifecycleConfig,
    private readonly log: Logger,
    private readonly bootSpec: (unit: UnitRecord) => Promise<BootSpec>,
  ) {}

  /** Reconciles the database with what runs on the host, then starts the idle sweep. */
  async start(): Promise<void> {
    const live = await this.runtime.running();
    for (const [id, state] of live) {
      const unit = await this.store.units.getById(id);
      if (!unit) {
        this.log.warn({ unitId: id }, "stopping a container whose unit no longer exists");
        await this.runtime.stop(id).catch((err) => this.log.error({ err, unitId: id }, "stop failed"));
        continue;
      }
      const status: UnitStatus = state === "paused" ? "warm" : "running";
      this.track(unit, status);
      if (unit.status !== status) await this.persist(unit, status);
      this.log.info({ unit: unit.name, unitId: id, status }, "re-adopted a unit that kept running");
    }
    for (const unit of await this.store.units.withStatus(["running", "warm"])) {
      if (!live.has(unit.id)) await this.persist(unit, "cold");
    }
    this.timer = setInterval(() => void this.sweep(), this.cfg.sweepMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    // Disks not made yet are made by the units' first boots: only wait for those under way.
    await this.disks.close();
    await this.runtime.close();
  }

  statusOf(unitId: string): UnitStatus {
    return this.tracked.get(unitId)?.status ?? "cold";
  }

  /** Makes sure the unit runs (booting or resuming it) and holds it awake until `release()`. */
  async acquire(org: OrgRecord, unit: UnitRecord): Promise<() => void> {
    const release = this.activity.hold(unit.id);
    try {
      await this.mutex.run(unit.id, () => this.ensureRunning(org, unit));
      return release;
    } catch (err) {
      release();
      throw err;
    }
  }

  private async ensureRunning(org: OrgRecord, unit: UnitRecord): Promise<void> {
    let current = this.statusOf(unit.id);
    if (current === "running") {
      if (await this.runtime.isAlive(unit.id)) return;
      // Its processes are gone (the agent was killed, say): clean up and boot it again.
      this.log.warn({ unit: unit.name, unitId: unit.id }, "a running unit died; booting it again");
      await this.runtime.stop(unit.id);
      this.tracked.delete(unit.id);
      current = "cold";
    }
    await this.makeRoom(org, unit.id);
    if (current === "warm") {
      await this.runtime.resume(unit.id);
    } else {
      await this.runtime.boot(await this.bootSpec(unit));
    }
    this.track(unit, "running");
    await this.persist(unit, "running");
  }

  /** Keeps the organization within running_limit by moving its least recently used idle unit down. */
  private async makeRoom(org: OrgRecord, wakingId: string): Promise<void> {
    const running = [...this.tracked.entries()].filter(
      ([id, t]) => t.orgId === org.id && t.status === "running" && id !== wakingId,
    );
    if (running.length < org.runningLimit) return;
    const idle = running
      .filter(([id]) => !this.activity.isHeld(id))
      .sort(([a], [b]) => this.activity.idleFor(b) - this.activity.idleFor(a));
    const victim = idle[0];
    if (!victim) {
      throw new RunningLimitError(
        `organization '${org.slug}' already runs ${running.length} busy units (running_limit ${org.runningLimit}); wait for one to go idle or raise the limit`,
      );
    }
    await this.mutex.run(victim[0], () => this.toWarm(victim[0], org.warmLimit));
  }

  private async toWarm(id: string, warmLimit?: number): Promise<void> {
    const t = this.tracked.get(id);
    if (t?.status !== "running" || this.activity.isHeld(id)) return;
    const limit = warmLimit ?? (await this.store.orgs.getById(t.orgId))?.warmLimit ?? 0;
    const warm = [...this.tracked.entries()].filter(([, x]) => x.orgId === t.orgId && x.status === "warm");
    if (warm.length >= limit) {
      // No room to keep it warm: the oldest warm unit goes cold first, or this one if none may be warm.
      const oldest = warm.sort(([, a], [, b]) => a.since - b.since)[0];
      if (oldest && limit > 0) await this.toCold(oldest[0]);
      else return this.toCold(id);
    }
    await this.runtime.pause(id);
    t.status = "warm";
    t.since = Date.now();
    await this.persistById(id, "warm");
  }

  private async toCold(id: string): Promise<void> {
    const t = this.tracked.get(id);
    if (!t || this.activity.isHeld(id)) return;
    await this.runtime.stop(id);
    this.tracked.delete(id);
    await this.persistById(id, "cold");
  }

  /** The idle sweep: busy CPU counts as activity; idle running → warm; long-warm → cold. */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const now = Date.now();
      for (const [id, t] of [...this.tracked.entries()]) {
        if (this.activity.isHeld(id)) continue;
        if (t.status === "running") {
          const stats = await this.runtime.stats(id);
          if (stats && t.cpuNs !== undefined && t.cpuAt !== undefined) {
            const share = (stats.cpuNs - t.cpuNs) / 1e6 / Math.max(1, now - t.cpuAt);
            if (share > this.cfg.busyCpu) this.activity.touch(id, now);
          }
          if (stats) {
            t.cpuNs = stats.cpuNs;
            t.cpuAt = now;
          }
          if (this.activity.idleFor(id, now) >= this.cfg.idleWarmMs) {
            await this.mutex
              .run(id, () => this.toWarm(id))
              .catch((err) => this.log.error({ err, unitId: id }, "pause failed"));
          }
        } else if (t.status === "warm" && now - t.since >= this.cfg.idleColdMs) {
          await this.mutex
            .run(id, () => this.toCold(id))
            .catch((err) => this.log.error({ err, unitId: id }, "stop failed"));
        }
      }
    } finally {
      this.sweeping = false;
    }
  }

  /**
   * Gives a new unit its disk. The snapshot is taken right after the create is answered (a host
   * command costs ~10 ms; the API answers in ~1): anything that needs the unit waits for it under
   * the unit's lock, and a boot that finds no disk (say, after a crash) takes the snapshot itself.
   */
  create(unit: UnitRecord): void {
    void this.mutex
      .run(unit.id, () => this.disks.run(() => this.runtime.create(unit.id)))
      .catch((err) =>
        this.log.error({ err, unitId: unit.id }, "creating the unit's disk failed; its first boot retries"),
      );
  }

  async destroy(unit: UnitRecord): Promise<void> {
    await this.mutex.run(unit.id, async () => {
      await this.runtime.destroy(unit.id);
      this.tracked.delete(unit.id);
      this.activity.forget(unit.id);
    });
  }

  /** Spec 2.4: healthy when the agent answers in time. */
  async health(
    unit: UnitRecord,
    timeoutMs = 2000,
  ): Promise<{ status: "healthy" | "hibernated" | "unhealthy"; reason: string | null }> {
    const status = this.statusOf(unit.id);
    if (status !== "running") return { status: "hibernated", reason: `unit is ${status}` };
    if (!(await this.runtime.isAlive(unit.id))) {
      return { status: "unhealthy", reason: "the unit's processes are gone; the next request boots it again" };
    }
    try {
      await agentHealth(this.runtime.agentSocket(unit.id), timeoutMs);
      return { status: "healthy", reason: null };
    } catch (err) {
      return {
        status: "unhealthy",
        reason: `agent did not answer: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }

  private track(unit: UnitRecord, status: UnitStatus): void {
    const t = this.tracked.get(unit.id);
    if (t) {
      t.status = status;
      t.since = Date.now();
    } else {
      this.tracked.set(unit.id, { orgId: unit.orgId, name: unit.name, status, since: Date.now() });
    }
  }

  private async persistById(id: string, status: UnitStatus): Promise<void> {
    const unit = await this.store.units.getById(id);
    if (unit) await this.persist(unit, status);
  }

  private async persist(unit: UnitRecord, status: UnitStatus): Promise<void> {
    const now = new Date().toISOString();
    await this.store.units.update(unit.orgId, unit.name, {
      status,
      updatedAt: unit.updatedAt,
      ...(status === "running" && { lastRunningAt: now }),
      ...(status === "warm" && { lastWarmingAt: now }),
    });
  }
}
