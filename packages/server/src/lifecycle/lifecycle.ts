import { availableParallelism } from "node:os";
import type { Logger } from "pino";
import type { AgentTimeouts } from "../agent/deadline.js";
import type { EmitEvent } from "../events/event-log.js";
import { failpoint } from "../failpoints/failpoints.js";
import { DOWN_AFTER_MS } from "../node/registry/liveness.js";
import type { BootSpec, StopOpts, UnitRuntime } from "../runtime/runtime.js";
import type { OrgRecord, UnitRecord, UnitStatus } from "../store/records.js";
import type { Store } from "../store/store.js";
import type { Activity } from "./activity.js";
import type { CapacityQueue, Place } from "./capacity.js";
import { type CheckpointResult, CheckpointWork } from "./checkpoints.js";
import { RunningLimitError, UnitBusyError, UnitDeletedError, UnitMovingError } from "./errors.js";
import { ImageWork } from "./images.js";
import { type HealthResult, Liveness } from "./liveness.js";
import { reconcile } from "./readopt.js";
import { TemplateWork } from "./templates.js";
import { UnitTable } from "./unit-table.js";
import { WorkQueue } from "./work-queue.js";

export type { CheckpointResult };
export { RunningLimitError, UnitDeletedError };

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
  /**
   * Issue #15: this node's id. It re-adopts and sweeps only its own units, templates and images
   * (and those that name no node), and names itself in the templates and images it makes.
   * Undefined: every one is its own, as before nodes (tests).
   */
  readonly nodeId?: string;
}

/** Told when a unit starts running (booted or re-adopted) and when it stops. */
export interface LifecycleHooks {
  running(unitId: string): Promise<void>;
  stopped(unitId: string): Promise<void>;
}

const ALIVE_FOR_MS = 1000;
/** Issue #16: how many boots run at once by default (two per CPU; the rest wait, first come first served). */
export const BOOTS_AT_ONCE = Math.max(2, 2 * availableParallelism());
/** How long a deleted unit's id is remembered (UnitTable.pruneDeleted). */
const DELETED_FOR_MS = 15 * 60_000;

/**
 * The unit lifecycle on a host (spec 3.1, docs/ARCHITECTURE.md section 5): cold → running on
 * demand, running → warm when idle, warm → cold after longer idleness; limits per organization;
 * re-adoption after a restart (readopt.ts). Checkpoints are `CheckpointWork`'s (checkpoints.ts),
 * liveness and health `Liveness`'s (liveness.ts); both change units under the same locks.
 */
export class Lifecycle {
  private readonly table: UnitTable;
  private readonly liveness: Liveness;
  /** Checkpoints, restores, forks and deletions (checkpoints.ts), under the same unit locks. */
  readonly checkpoints: CheckpointWork;
  /** Organization templates (issue #18). */
  readonly templates: TemplateWork;
  /** Organization images (issue #18). */
  readonly images: ImageWork;
  /** Disk snapshots run in the background, two at a time. */
  private readonly disks = new WorkQueue(2);
  /**
   * Issue #16: boots run at most this many at once, the others wait their turn in order (a burst
   * of boots shares the host's CPUs: all at once, each one's agent would wait on all the others).
   */
  private readonly boots: WorkQueue;
  private timer: NodeJS.Timeout | undefined;
  private hooks: LifecycleHooks = { running: async () => {}, stopped: async () => {} };
  private sweeping = false;
  /** Issue #17: the lifecycle's events (booted, woken, warmed, cooled, limit.reached), actor `system`. */
  private emit: EmitEvent = () => {};
  /** When a wake of each unit was last refused for the running limit (limit.reached is not repeated within 10 s). */
  private readonly refusedAt = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly runtime: UnitRuntime,
    private readonly cfg: LifecycleConfig,
    private readonly log: Logger,
    private readonly bootSpec: (unit: UnitRecord) => Promise<BootSpec>,
  ) {
    this.table = new UnitTable(store);
    this.boots = new WorkQueue(BOOTS_AT_ONCE);
    this.liveness = new Liveness(this.table, runtime, log, cfg.agentTimeouts);
    this.checkpoints = new CheckpointWork(
      this.table,
      store,
      runtime,
      {
        stopLocked: async (unit, opts) => {
          await this.stopTracked(unit.id, opts);
          await this.table.persist(unit, "cold");
        },
        ensureRunningLocked: (org, unit) => this.ensureRunning(org, unit),
      },
      cfg.nodeId,
    );
    this.templates = new TemplateWork(this.table, store, runtime, log, cfg.nodeId);
    this.images = new ImageWork(this.table, store, runtime, log, cfg.nodeId);
  }

  /** What keeps units awake: requests in flight, sessions, proxied connections, keep-awake tasks. */
  get activity(): Activity {
    return this.table.activity;
  }

  /** Issue #16: the organizations' running slots and the wakes that wait for one. */
  get capacity(): CapacityQueue {
    return this.table.capacity;
  }

  setHooks(hooks: LifecycleHooks): void {
    this.hooks = hooks;
  }

  setEvents(emit: EmitEvent): void {
    this.emit = emit;
  }

  /** Records an event of this node's units (the internal API's checkpoints, services' crashes). */
  readonly event: EmitEvent = (e) => this.emit(e);

  /** Reconciles the database with what runs on the host, then starts the idle sweep. */
  async start(): Promise<void> {
    await reconcile({
      store: this.store,
      runtime: this.runtime,
      table: this.table,
      checkpoints: this.checkpoints,
      log: this.log,
      running: (id) => this.hooks.running(id),
      nodeId: this.cfg.nodeId,
    });
    await this.templates.sweep();
    await this.images.sweep();
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
    return this.table.statusOf(unitId);
  }

  /** The units that run or are warm now, with their status (issue #17: metrics, the usage sampler). */
  tracked(): { unitId: string; status: UnitStatus }[] {
    return this.table.entries().map(([unitId, t]) => ({ unitId, status: t.status }));
  }

  /** The units that run now (the usage sampler, the agent.log cap). */
  runningIds(): string[] {
    return this.tracked().flatMap((t) => (t.status === "running" ? [t.unitId] : []));
  }

  /** Makes sure the unit runs (booting or resuming it) and holds it awake until `release()`. */
  /** Issue #15: units moving off this node: no wake starts them here meanwhile. */
  private readonly moving = new Set<string>();

  /**
   * Issue #15: the unit is about to move to another node: from now on no wake starts it here; it is
   * stopped (cold) unless a request holds it (`UnitBusyError`).
   */
  async beginMove(unit: UnitRecord): Promise<void> {
    this.moving.add(unit.id);
    try {
      await this.table.mutex.run(unit.id, async () => {
        this.table.assertNotDeleted(unit);
        if (this.activity.isHeld(unit.id)) {
          throw new UnitBusyError(
            `unit '${unit.name}' is in use (a request, a session or a keep-awake task holds it): move it once it is idle`,
          );
        }
        if (this.table.get(unit.id)) {
          await this.stopTracked(unit.id);
          await this.table.persist(unit, "cold");
        }
      });
    } catch (err) {
      this.moving.delete(unit.id);
      throw err;
    }
  }

  /** Whether the unit is moving off this node (between `beginMove` and `endMove` or `moved`). */
  isMoving(unitId: string): boolean {
    return this.moving.has(unitId);
  }

  /** The move did not happen: the unit is this node's again. */
  endMove(unitId: string): void {
    this.moving.delete(unitId);
  }

  /**
   * The unit moved to another node (its record is the other node's now): nothing of it stays here
   * but the snapshots of checkpoints `keep`, when given (runtime `retire`). With `keep`, resolves
   * once the unit is marked retired; `removed` is the rest (its files going), done under the unit's
   * lock (a move back waits for it).
   */
  async moved(unit: UnitRecord, keep?: readonly string[]): Promise<{ removed: Promise<void> }> {
    let removed: Promise<void> = Promise.resolve();
    await this.table.mutex.run(unit.id, async () => {
      this.table.untrack(unit.id);
      this.activity.forget(unit.id);
      if (keep !== undefined) {
        await this.runtime.markRetired(unit.id);
        removed = this.table.mutex.run(unit.id, () => this.runtime.retire(unit.id, keep));
      } else {
        await this.runtime.destroy(unit.id);
        await this.runtime.forget(unit.id);
      }
    });
    this.moving.delete(unit.id);
    return { removed };
  }

  /** Runs `fn` while nothing else of this node changes the unit (its boot, stop, checkpoints, move). */
  withUnitLock<T>(unitId: string, fn: () => Promise<T>): Promise<T> {
    return this.table.mutex.run(unitId, fn);
  }

  /**
   * Makes sure the unit runs and holds it awake until the returned release. `place` is the wake's
   * arrival (capacity.ts): at the running limit it yields to the waiters that arrived before it.
   */
  async acquire(org: OrgRecord, unit: UnitRecord, place?: Place): Promise<() => void> {
    if (this.moving.has(unit.id)) {
      throw new UnitMovingError(`unit '${unit.name}' is moving to another node; try again in a few seconds`);
    }
    // Fast path for a unit that runs and was seen alive just now: no lock, no check. Nothing can
    // pause it meanwhile: a pause begins only when the unit is not held, and marks it `changing`
    // before it looks (single-threaded, so the two never interleave).
    const t = this.table.get(unit.id);
    if (t?.status === "running" && !t.changing && Date.now() - (t.aliveAt ?? 0) < ALIVE_FOR_MS) {
      return this.activity.hold(unit.id);
    }
    const release = this.activity.hold(unit.id);
    try {
      await this.table.mutex.run(unit.id, () => this.ensureRunning(org, unit, place));
      return release;
    } catch (err) {
      release();
      throw err;
    }
  }

  private async ensureRunning(org: OrgRecord, unit: UnitRecord, place?: Place): Promise<void> {
    try {
      await this.startIfStopped(org, unit, place);
    } finally {
      // A slot taken for a start that failed is free again (one that ran was counted as running).
      if (this.capacity.unreserve(unit.id)) this.capacity.free(org.id);
    }
  }

  /** Boots or resumes the unit unless it runs and answers (under its lock). */
  private async startIfStopped(org: OrgRecord, unit: UnitRecord, place?: Place): Promise<void> {
    // A request that read the unit before a delete must not boot it again: the boot would make a
    // fresh disk and a running container that no row knows of, left on the host for good.
    this.table.assertNotDeleted(unit);
    let current = this.statusOf(unit.id);
    if (current === "running") {
      const usable = await this.liveness.usable(unit.id);
      if (usable.ok) {
        this.table.markAlive(unit.id);
        return;
      }
      if (usable.why === "stuck") {
        // Spec 2.4: its agent missed a deadline and does not answer now either (stopped or traced
        // by unit root, say): the unit is restarted rather than left to hang every request.
        this.log.warn(
          { unit: unit.name, unitId: unit.id, reason: usable.reason },
          "a unit's agent is stuck; restarting it",
        );
      } else {
        // Its processes are gone (the agent was killed, say): clean up and boot it again.
        this.log.warn({ unit: unit.name, unitId: unit.id }, "a running unit died; booting it again");
      }
      await this.stopTracked(unit.id);
      current = "cold";
    }
    // From here the unit holds one of its organization's running slots (capacity.ts).
    await this.makeRoom(org, unit, place);
    const started = Date.now();
    if (current === "warm") {
      await this.runtime.resume(unit.id);
    } else {
      const spec = await this.bootSpec(unit);
      await this.boots.run(() => this.runtime.boot(spec));
      await this.hooks.running(unit.id);
    }
    this.table.track(unit, "running");
    this.table.markAlive(unit.id);
    await this.table.persist(unit, "running");
    this.emit({
      orgId: unit.orgId,
      type: current === "warm" ? "unit.woken" : "unit.booted",
      unit: unit.name,
      actor: "system",
      data: { ms: Date.now() - started },
    });
  }

  /** Stops the unit's processes and forgets it as running (the caller records it cold). */
  private async stopTracked(unitId: string, opts?: StopOpts): Promise<void> {
    await this.runtime.stop(unitId, opts);
    await this.hooks.stopped(unitId);
    this.table.untrack(unitId);
  }

  /** Whether the unit is being deleted or was: its agent's calls fail for that, not for a fault. */
  isDeleted(unitId: string): boolean {
    return this.table.isGoing(unitId);
  }

  /** A request found the unit's agent gone: the next acquire checks (and reboots) it. */
  suspect(unitId: string): void {
    this.liveness.suspect(unitId);
  }

  /** How long the host waits on units' agents (issue #19 finding 8). */
  get agentTimeouts(): AgentTimeouts {
    return this.liveness.timeouts;
  }

  /** A call to the unit's agent missed its deadline: the unit is unhealthy (spec 2.4). */
  agentTimedOut(unitId: string, reason: string): void {
    this.liveness.agentTimedOut(unitId, reason);
  }

  /** Spec 2.4: the unit's health, as `GET /v1/units/{name}/check` reports it. */
  health(unit: UnitRecord, timeoutMs = 2000): Promise<HealthResult> {
    return this.liveness.health(unit, timeoutMs);
  }

  /**
   * Keeps the organization within running_limit (docs/ARCHITECTURE.md section 5): admits the
   * waking unit when a slot is free and no earlier waiter wants it, else moves the organization's
   * least recently used idle unit of this node down for it, else refuses (`RunningLimitError`).
   * An admitted unit holds its slot (`capacity.reserve`) until it runs or fails to start, so that
   * wakes at once cannot all pass the limit while none of them runs yet.
   */
  private async makeRoom(org: OrgRecord, waking: UnitRecord, place?: Place): Promise<void> {
    const cap = this.capacity;
    for (let attempt = 0; ; attempt++) {
      const ahead = cap.ahead(org.id, place);
      if (ahead > 0) {
        throw this.refuse(org, waking, `has ${ahead} earlier wake${ahead === 1 ? "" : "s"} waiting for a running slot`);
      }
      const running = this.table
        .entries()
        .filter(([id, t]) => t.orgId === org.id && t.status === "running" && id !== waking.id && !cap.isLeaving(id));
      const local = running.length + cap.startingOf(org.id, waking.id);
      let total = local;
      if (local < org.runningLimit) {
        cap.reserve(org.id, waking.id);
        // Issue #15: the limit is the organization's, across nodes. Those that run elsewhere count
        // (not those of a node that is down); only units of this node can be moved down from here.
        const elsewhere = await this.runningElsewhere(org);
        if (local + elsewhere < org.runningLimit) return this.admitted(place);
        cap.unreserve(waking.id);
        total = local + elsewhere;
      }
      const victim = running
        .filter(([id]) => !this.activity.isHeld(id))
        .sort(([a], [b]) => this.activity.idleFor(b) - this.activity.idleFor(a))[0]?.[0];
      if (!victim || attempt >= 3) {
        const others = total - local;
        const where = others > 0 ? `, ${others} of them on other nodes` : "";
        throw this.refuse(org, waking, `already runs ${total} busy units (running_limit ${org.runningLimit}${where})`);
      }
      cap.reserve(org.id, waking.id);
      cap.makingRoom(victim);
      try {
        await this.table.mutex.run(victim, () => this.toWarm(victim, org.warmLimit));
      } finally {
        cap.madeRoom(victim);
      }
      if (this.table.get(victim)?.status !== "running") return this.admitted(place);
      // A request took the idle unit meanwhile (it still runs): look again.
      cap.unreserve(waking.id);
    }
  }

  /** The wake has its slot: it waits no more, and the next waiter looks for a slot too. */
  private admitted(place: Place | undefined): void {
    if (place) this.capacity.leave(place);
  }

  /** How many of the organization's units run on other nodes that are up (none without nodes). */
  private async runningElsewhere(org: OrgRecord): Promise<number> {
    const nodeId = this.cfg.nodeId;
    if (!nodeId) return 0;
    const upSince = new Date(Date.now() - DOWN_AFTER_MS).toISOString();
    return this.store.units.countOnOtherNodes(org.id, "running", nodeId, upSince);
  }

  /** A wake refused at the running limit; `limit.reached` at most once per unit per 10 s. */
  private refuse(org: OrgRecord, waking: UnitRecord, why: string): RunningLimitError {
    // A wake that waits for capacity asks again: one event per unit per 10 s.
    const lastRefusal = this.refusedAt.get(waking.id) ?? 0;
    if (Date.now() - lastRefusal > 10_000) {
      this.refusedAt.set(waking.id, Date.now());
      if (this.refusedAt.size > 10_000) this.refusedAt.clear();
      const running = this.table.entries().filter(([, t]) => t.orgId === org.id && t.status === "running").length;
      this.emit({
        orgId: org.id,
        type: "limit.reached",
        unit: waking.name,
        actor: "system",
        data: { kind: "running_limit", limit: org.runningLimit, running },
      });
    }
    return new RunningLimitError(`organization '${org.slug}' ${why}; wait for one to go idle or raise the limit`);
  }

  private async toWarm(id: string, warmLimit?: number): Promise<void> {
    const t = this.table.get(id);
    if (t?.status !== "running" || this.activity.isHeld(id)) return;
    t.changing = true;
    try {
      const limit = warmLimit ?? (await this.store.orgs.getById(t.orgId))?.warmLimit ?? 0;
      const warm = this.table.entries().filter(([, x]) => x.orgId === t.orgId && x.status === "warm");
      if (warm.length >= limit) {
        // No room to keep it warm: the oldest warm unit goes cold first, or this one if none may be warm.
        const oldest = warm.sort(([, a], [, b]) => a.since - b.since)[0];
        if (oldest && limit > 0) await this.toCold(oldest[0]);
        else return await this.toCold(id);
      }
      await this.runtime.pause(id);
      t.status = "warm";
      t.since = Date.now();
      this.capacity.free(t.orgId);
      await this.table.persistById(id, "warm");
      this.emit({ orgId: t.orgId, type: "unit.warmed", unit: t.name, actor: "system", data: {} });
    } finally {
      t.changing = false;
    }
  }

  private async toCold(id: string): Promise<void> {
    const t = this.table.get(id);
    if (!t || this.activity.isHeld(id)) return;
    t.changing = true;
    await this.stopTracked(id);
    await this.table.persistById(id, "cold");
    this.emit({ orgId: t.orgId, type: "unit.cooled", unit: t.name, actor: "system", data: { from: t.status } });
  }

  /** The idle sweep: busy CPU counts as activity; idle running → warm; long-warm → cold. */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const now = Date.now();
      this.table.pruneDeleted(DELETED_FOR_MS, now);
      for (const [id, t] of this.table.entries()) {
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
            await this.table.mutex
              .run(id, () => this.toWarm(id))
              .catch((err) => this.log.error({ err, unitId: id }, "pause failed"));
          }
        } else if (t.status === "warm" && now - t.since >= this.cfg.idleColdMs) {
          await this.table.mutex
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
    void this.table.mutex
      .run(unit.id, async () => {
        this.table.assertNotDeleted(unit);
        await this.disks.run(() => this.runtime.create(unit.id));
      })
      .catch((err) => {
        if (err instanceof UnitDeletedError) return; // deleted before its disk was made: nothing to make
        this.log.error({ err, unitId: unit.id }, "creating the unit's disk failed; its first boot retries");
      });
  }

  /**
   * Removes the unit's host resources, then its record (`drop`, whose answer is returned), then the
   * tombstone that stood for it meanwhile (runtime.ts `destroy`): a crash part way is finished at
   * the next start (readopt.ts), never a record left without its disk.
   */
  async destroy<T>(unit: UnitRecord, drop: () => Promise<T>): Promise<T> {
    return this.table.mutex.run(unit.id, async () => {
      let dropped!: T;
      await this.table.destroying(unit.id, async () => {
        await this.hooks.stopped(unit.id);
        await this.runtime.destroy(unit.id);
        failpoint("unit-delete.destroyed");
        dropped = await drop();
        failpoint("unit-delete.dropped");
        await this.runtime.forget(unit.id);
      });
      this.table.untrack(unit.id);
      this.activity.forget(unit.id);
      return dropped;
    });
  }
}
