import type { Logger } from "pino";
import { failpoint } from "../failpoints/failpoints.js";
import { type AgentTimeouts, agentHealth, DEFAULT_AGENT_TIMEOUTS } from "../runtime/agent-client.js";
import type { BootSpec, UnitRuntime } from "../runtime/runtime.js";
import type { CheckpointRecord, OrgRecord, UnitRecord, UnitStatus } from "../store/records.js";
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
  /** How long the host waits on a unit's agent (default DEFAULT_AGENT_TIMEOUTS). */
  readonly agentTimeouts?: AgentTimeouts;
}

export class RunningLimitError extends Error {}

/** Told when a unit starts running (booted or re-adopted) and when it stops. */
export interface LifecycleHooks {
  running(unitId: string): Promise<void>;
  stopped(unitId: string): Promise<void>;
}

export interface CheckpointResult {
  readonly checkpoint: CheckpointRecord;
  /** How long the unit's processes were frozen (0 when it was not running). */
  readonly frozenMs: number;
}

interface Tracked {
  orgId: string;
  name: string;
  status: UnitStatus;
  /** When the unit entered its current status (ms). */
  since: number;
  cpuNs?: number;
  cpuAt?: number;
  /** When the unit was last seen alive (ms): requests within a second skip the check. */
  aliveAt?: number;
  /** Set while the unit is being paused, stopped or restored: requests take the slow path. */
  changing?: boolean;
  /** Why the unit's agent is taken for stuck (it missed a deadline): the next acquire restarts it. */
  unhealthy?: string;
}

const ALIVE_FOR_MS = 1000;
/** How long a stuck-looking agent gets to answer /health before its unit is restarted. */
const STUCK_PROBE_MS = 3000;

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
  private hooks: LifecycleHooks = { running: async () => {}, stopped: async () => {} };
  private sweeping = false;

  constructor(
    private readonly store: Store,
    private readonly runtime: UnitRuntime,
    private readonly cfg: LifecycleConfig,
    private readonly log: Logger,
    private readonly bootSpec: (unit: UnitRecord) => Promise<BootSpec>,
  ) {}

  setHooks(hooks: LifecycleHooks): void {
    this.hooks = hooks;
  }

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
      // A full idle period from now: unknown activity is not idleness (the first sweep would pause it).
      this.activity.touch(id);
      await this.hooks.running(id);
      if (unit.status !== status) await this.persist(unit, status);
      this.log.info({ unit: unit.name, unitId: id, status }, "re-adopted a unit that kept running");
    }
    for (const unit of await this.store.units.withStatus(["running", "warm"])) {
      if (!live.has(unit.id)) await this.persist(unit, "cold");
    }
    // Interrupted checkpoint work: restores whose new files are in place are recorded now.
    const forward = await this.runtime.recover(async (unitId) => {
      if (!(await this.store.units.getById(unitId))) return undefined;
      return new Set((await this.store.checkpoints.list(unitId)).map((c) => c.id));
    });
    for (const { unitId, checkpoint } of forward) {
      const unit = await this.store.units.getById(unitId);
      const cp = unit && (await this.store.checkpoints.get(unitId, checkpoint));
      if (unit && cp) await this.recordRestore(unit, cp);
      await this.runtime.completeRestore(unitId);
      this.log.info({ unitId, checkpoint }, "finished a restore interrupted by a crash");
    }
    this.timer = setInterval(
      () => this.sweep().catch((err) => this.log.error({ err }, "the idle sweep failed; the next one tries again")),
      this.cfg.sweepMs,
    );
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
    // Fast path for a unit that runs and was seen alive just now: no lock, no check. Nothing can
    // pause it meanwhile: a pause begins only when the unit is not held, and marks it `changing`
    // before it looks (single-threaded, so the two never interleave).
    const t = this.tracked.get(unit.id);
    if (t?.status === "running" && !t.changing && Date.now() - (t.aliveAt ?? 0) < ALIVE_FOR_MS) {
      return this.activity.hold(unit.id);
    }
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
      const unhealthy = this.tracked.get(unit.id)?.unhealthy;
      if (await this.runtime.isAlive(unit.id)) {
        if (unhealthy === undefined || (await this.agentAnswers(unit.id))) {
          this.markAlive(unit.id);
          return;
        }
        // Spec 2.4: its agent missed a deadline and does not answer now either (stopped or traced
        // by unit root, say): the unit is restarted rather than left to hang every request.
        this.log.warn(
          { unit: unit.name, unitId: unit.id, reason: unhealthy },
          "a unit's agent is stuck; restarting it",
        );
      } else {
        // Its processes are gone (the agent was killed, say): clean up and boot it again.
        this.log.warn({ unit: unit.name, unitId: unit.id }, "a running unit died; booting it again");
      }
      await this.runtime.stop(unit.id);
      await this.hooks.stopped(unit.id);
      this.tracked.delete(unit.id);
      current = "cold";
    }
    await this.makeRoom(org, unit.id);
    if (current === "warm") {
      await this.runtime.resume(unit.id);
    } else {
      await this.runtime.boot(await this.bootSpec(unit));
      await this.hooks.running(unit.id);
    }
    this.track(unit, "running");
    this.markAlive(unit.id);
    await this.persist(unit, "running");
  }

  /** A request found the unit's agent gone: the next acquire checks (and reboots) it. */
  suspect(unitId: string): void {
    const t = this.tracked.get(unitId);
    if (t) t.aliveAt = 0;
  }

  /** How long the host waits on units' agents (issue #19 finding 8). */
  get agentTimeouts(): AgentTimeouts {
    return this.cfg.agentTimeouts ?? DEFAULT_AGENT_TIMEOUTS;
  }

  /**
   * A call to the unit's agent missed its deadline: the unit is unhealthy (spec 2.4), and the next
   * acquire restarts it unless its agent answers by then (a stopped agent that was continued).
   */
  agentTimedOut(unitId: string, reason: string): void {
    const t = this.tracked.get(unitId);
    if (t?.status !== "running") return;
    if (t.unhealthy === undefined) {
      this.log.warn({ unit: t.name, unitId, reason }, "a unit's agent missed a deadline; the unit is unhealthy");
      t.unhealthy = reason;
    }
    t.aliveAt = 0;
  }

  /** Whether the unit's agent answers /health now; clears the unit's unhealthy mark when it does. */
  private async agentAnswers(unitId: string): Promise<boolean> {
    try {
      await agentHealth(this.runtime.agentSocket(unitId), Math.min(STUCK_PROBE_MS, this.agentTimeouts.answerMs));
    } catch {
      return false;
    }
    const t = this.tracked.get(unitId);
    if (t) t.unhealthy = undefined;
    return true;
  }

  private markAlive(id: string): void {
    const t = this.tracked.get(id);
    if (t) t.aliveAt = Date.now();
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
    t.changing = true;
    try {
      await this.pauseTracked(id, t, warmLimit);
    } finally {
      t.changing = false;
    }
  }

  private async pauseTracked(id: string, t: Tracked, warmLimit?: number): Promise<void> {
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
    t.changing = true;
    await this.runtime.stop(id);
    await this.hooks.stopped(id);
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
      await this.hooks.stopped(unit.id);
      await this.runtime.destroy(unit.id);
      this.tracked.delete(unit.id);
      this.activity.forget(unit.id);
    });
  }

  /**
   * Spec 4.2: a checkpoint of the unit's files (and the policies in force), taken live: a running
   * unit is frozen only for the snapshot itself.
   */
  checkpoint(unit: UnitRecord, comment: string, progress: (msg: string) => void): Promise<CheckpointResult> {
    return this.mutex.run(unit.id, () => this.takeCheckpoint(unit, comment, progress));
  }

  private async takeCheckpoint(
    unit: UnitRecord,
    comment: string,
    progress: (msg: string) => void,
  ): Promise<CheckpointResult> {
    const fresh = (await this.store.units.getById(unit.id)) ?? unit;
    const seq = await this.store.checkpoints.nextSeq(unit.id);
    const id = `v${seq}`;
    progress(`saving the files of unit '${unit.name}' as checkpoint ${id}`);
    const { frozenMs } = await this.runtime.checkpoint(unit.id, id);
    failpoint("checkpoint.snapshotted");
    const cp: CheckpointRecord = {
      unitId: unit.id,
      id,
      seq,
      comment,
      sourceId: fresh.activeCheckpoint,
      resources: fresh.resources,
      privileges: fresh.privileges,
      network: fresh.network,
      createdAt: new Date().toISOString(),
    };
    // A crash before this insert leaves a snapshot the database does not know: removed at start.
    await this.store.checkpoints.insert(cp);
    failpoint("checkpoint.recorded");
    await this.store.units.update(unit.orgId, unit.name, { activeCheckpoint: id });
    return { checkpoint: cp, frozenMs };
  }

  /**
   * Spec 3.3: the current state is saved first (nothing is ever lost by a restore), processes are
   * stopped, the files and policies become the checkpoint's, and the unit boots.
   */
  restore(
    org: OrgRecord,
    unit: UnitRecord,
    cp: CheckpointRecord,
    progress: (msg: string) => void,
  ): Promise<CheckpointRecord> {
    return this.mutex.run(unit.id, async () => {
      const t = this.tracked.get(unit.id);
      if (t) t.changing = true;
      let backup: CheckpointResult;
      try {
        backup = await this.takeCheckpoint(unit, `automatic backup before restoring ${cp.id}`, progress);
      } catch (err) {
        if (t) t.changing = false;
        throw err;
      }
      progress(`saved the current state as ${backup.checkpoint.id}; stopping the unit`);
      failpoint("restore.backed-up");
      await this.runtime.stop(unit.id);
      await this.hooks.stopped(unit.id);
      this.tracked.delete(unit.id);
      await this.persist(unit, "cold");
      failpoint("restore.stopped");
      progress(`restoring the files of checkpoint ${cp.id}`);
      await this.runtime.restoreDisk(unit.id, cp.id);
      failpoint("restore.swapped");
      await this.recordRestore(unit, cp);
      failpoint("restore.recorded");
      await this.runtime.completeRestore(unit.id);
      progress("booting the unit");
      const fresh = (await this.store.units.getById(unit.id)) ?? unit;
      await this.ensureRunning(org, fresh);
      return backup.checkpoint;
    });
  }

  private async recordRestore(unit: UnitRecord, cp: CheckpointRecord): Promise<void> {
    await this.store.units.update(unit.orgId, unit.name, {
      activeCheckpoint: cp.id,
      resources: cp.resources,
      privileges: cp.privileges,
      network: cp.network,
      updatedAt: new Date().toISOString(),
    });
  }

  /** Gives a new unit a copy of another unit's checkpoint as its disk (fork). */
  fork(source: UnitRecord, cp: CheckpointRecord, unit: UnitRecord): Promise<void> {
    return this.mutex.run(source.id, () => this.runtime.forkDisk(source.id, cp.id, unit.id));
  }

  deleteCheckpoint(unit: UnitRecord, cp: CheckpointRecord): Promise<void> {
    return this.mutex.run(unit.id, async () => {
      // The row goes first: a crash before the snapshot is deleted leaves an orphan, removed at start.
      await this.store.checkpoints.delete(unit.id, cp.id);
      failpoint("delete.row-deleted");
      await this.runtime.deleteCheckpoint(unit.id, cp.id);
    });
  }

  /**
   * Spec 2.4: healthy when the agent answers in time. One that does not is marked as stuck: the
   * next request restarts the unit (unless the agent answers by then).
   */
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
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ECONNREFUSED" || code === "ENOENT") {
        // No agent listens: PID 1 follows it within moments, and then the unit's processes are gone.
        for (let i = 0; i < 10; i++) {
          if (!(await this.runtime.isAlive(unit.id))) {
            return { status: "unhealthy", reason: "the unit's processes are gone; the next request boots it again" };
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      // The errno code, not the message: a socket error's message names a host path.
      const why = `agent did not answer: ${code ?? (err instanceof Error ? err.message : String(err))}`;
      this.agentTimedOut(unit.id, why);
      const first = this.tracked.get(unit.id)?.unhealthy ?? why;
      return { status: "unhealthy", reason: `${first}; the next request restarts the unit` };
    }
    const t = this.tracked.get(unit.id);
    if (t) t.unhealthy = undefined;
    return { status: "healthy", reason: null };
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
