import type { UnitRecord, UnitStatus } from "../store/records.js";
import type { Store } from "../store/store.js";
import { KeyedMutex } from "../util/keyed-mutex.js";
import { Activity } from "./activity.js";
import { CapacityQueue } from "./capacity.js";
import { UnitDeletedError } from "./errors.js";

/** What the lifecycle knows of a unit that runs or is warm (cold units are not tracked). */
export interface Tracked {
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

/**
 * The units a host's lifecycle tracks, the lock each one's changes take, what keeps each awake,
 * and their status as the database records it.
 */
export class UnitTable {
  /** Issue #16: the organizations' running slots and the wakes that wait for one (capacity.ts). */
  readonly capacity = new CapacityQueue();
  readonly activity = new Activity((unitId) => {
    // An idle running unit can be moved down to make room: the organization's first waiter looks.
    const t = this.tracked.get(unitId);
    if (t?.status === "running") this.capacity.free(t.orgId);
  });
  /** One change of a unit at a time (boot, pause, stop, checkpoint, restore, destroy). */
  readonly mutex = new KeyedMutex();
  private readonly tracked = new Map<string, Tracked>();
  /** Units destroyed (ms when): a request still holding one's record must not make it again. */
  private readonly deleted = new Map<string, number>();
  /** Units being destroyed now (under their lock). */
  private readonly deleting = new Set<string>();

  constructor(private readonly store: Store) {}

  get(unitId: string): Tracked | undefined {
    return this.tracked.get(unitId);
  }

  entries(): [string, Tracked][] {
    return [...this.tracked.entries()];
  }

  statusOf(unitId: string): UnitStatus {
    return this.tracked.get(unitId)?.status ?? "cold";
  }

  track(unit: UnitRecord, status: UnitStatus): void {
    const t = this.tracked.get(unit.id);
    if (t) {
      t.status = status;
      t.since = Date.now();
    } else {
      this.tracked.set(unit.id, { orgId: unit.orgId, name: unit.name, status, since: Date.now() });
    }
    if (status === "running") this.capacity.running(unit.orgId, unit.id);
  }

  untrack(unitId: string): void {
    const t = this.tracked.get(unitId);
    this.tracked.delete(unitId);
    // A unit that ran stopped (idle, deleted, moved, restored): its slot is free.
    if (t?.status === "running") this.capacity.free(t.orgId);
  }

  /** Runs the destruction of a unit's host resources (under its lock); on success it is deleted. */
  async destroying(unitId: string, destroy: () => Promise<void>): Promise<void> {
    this.deleting.add(unitId);
    try {
      await destroy();
      this.deleted.set(unitId, Date.now());
    } finally {
      this.deleting.delete(unitId);
    }
  }

  /** Whether the unit is being destroyed or was (a failing call to its agent is then no fault of the unit). */
  isGoing(unitId: string): boolean {
    return this.deleting.has(unitId) || this.deleted.has(unitId);
  }

  /** Throws `UnitDeletedError` for a unit destroyed on this host (call it under the unit's lock). */
  assertNotDeleted(unit: { id: string; name: string }): void {
    if (this.deleted.has(unit.id)) throw new UnitDeletedError(unit.name);
  }

  /**
   * Forgets deletions older than `ms`: by then no request still holds such a record (a request
   * resolves its unit and asks for it within its own deadline, far shorter).
   */
  pruneDeleted(ms: number, now = Date.now()): void {
    for (const [id, at] of this.deleted) if (now - at >= ms) this.deleted.delete(id);
  }

  markAlive(unitId: string): void {
    const t = this.tracked.get(unitId);
    if (t) t.aliveAt = Date.now();
  }

  async persistById(unitId: string, status: UnitStatus): Promise<void> {
    const unit = await this.store.units.getById(unitId);
    if (unit) await this.persist(unit, status);
  }

  async persist(unit: UnitRecord, status: UnitStatus): Promise<void> {
    const now = new Date().toISOString();
    await this.store.units.update(unit.orgId, unit.name, {
      status,
      updatedAt: unit.updatedAt,
      ...(status === "running" && { lastRunningAt: now }),
      ...(status === "warm" && { lastWarmingAt: now }),
    });
  }
}
