/**
 * Issue #16 part 6: the running slots of each organization on this node (docs/ARCHITECTURE.md
 * section 5, "Waiting for a running slot"). Wakes that find the organization at its running limit
 * and may wait (`wait_for_capacity`) queue here in the order they arrived; a slot that frees goes
 * to the one that waited longest, never to a wake that arrived after it. Units being booted or
 * resumed hold a slot from the moment they are admitted, so that wakes at once cannot all pass the
 * limit while none of them runs yet.
 */

/** A wake's place in the order of arrival (every wake takes one; only those that wait queue). */
export interface Place {
  readonly seq: number;
  readonly orgId: string;
  readonly unitId: string;
}

interface Waiter {
  readonly place: Place;
  /** Set when a slot may be free while the waiter was not waiting (it tries again at once). */
  nudged: boolean;
  wake?: () => void;
}

/** The waiter's client went away: it leaves the queue (`turn` rejects with this). */
export class WaitAbandonedError extends Error {}

export class CapacityQueue {
  private seq = 0;
  /** Per organization, its waiters by arrival. */
  private readonly queues = new Map<string, Waiter[]>();
  /** Units admitted under the running limit that do not run yet (booting or resuming): unit → org. */
  private readonly starting = new Map<string, string>();
  /** Idle units being moved down to make room: not counted, not chosen twice. */
  private readonly leaving = new Set<string>();

  /** A wake's place: its turn comes before that of every wake that arrives later. */
  arrive(orgId: string, unitId: string): Place {
    this.seq += 1;
    return { seq: this.seq, orgId, unitId };
  }

  /** How many waiters of the organization arrived before `place` (all of them without one). */
  ahead(orgId: string, place?: Place): number {
    const q = this.queues.get(orgId);
    if (!q) return 0;
    if (!place) return q.length;
    let n = 0;
    for (const w of q) if (w.place.seq < place.seq) n++;
    return n;
  }

  /** How many wakes wait in all (metrics, tests). */
  get waiting(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  /** Whether `place` is its organization's longest waiter. */
  isFirst(place: Place): boolean {
    return this.queues.get(place.orgId)?.[0]?.place === place;
  }

  /** Queues the wake by its arrival (a place that waits already stays where it is). */
  join(place: Place): void {
    const q = this.queues.get(place.orgId) ?? [];
    if (q.some((w) => w.place === place)) return;
    const at = q.findIndex((w) => w.place.seq > place.seq);
    const waiter: Waiter = { place, nudged: false };
    if (at < 0) q.push(waiter);
    else q.splice(at, 0, waiter);
    this.queues.set(place.orgId, q);
  }

  /** The wake got its slot or gave up: it leaves, and the next one looks for a slot too. */
  leave(place: Place): void {
    const q = this.queues.get(place.orgId);
    if (!q) return;
    const at = q.findIndex((w) => w.place === place);
    if (at < 0) return;
    q.splice(at, 1);
    if (q.length === 0) this.queues.delete(place.orgId);
    else if (at === 0) this.nudge(q[0] as Waiter);
  }

  /**
   * Waits until a slot may be free for this waiter (it is first and something freed one), `ms`
   * passed, or `signal` aborted (`WaitAbandonedError`).
   */
  turn(place: Place, ms: number, signal?: AbortSignal): Promise<void> {
    const waiter = this.queues.get(place.orgId)?.find((w) => w.place === place);
    if (!waiter) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(new WaitAbandonedError("the caller went away"));
    if (waiter.nudged) {
      waiter.nudged = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", abandon);
        waiter.wake = undefined;
      };
      const abandon = () => {
        done();
        reject(new WaitAbandonedError("the caller went away"));
      };
      const timer = setTimeout(() => {
        done();
        resolve();
      }, ms);
      waiter.wake = () => {
        done();
        waiter.nudged = false;
        resolve();
      };
      signal?.addEventListener("abort", abandon, { once: true });
    });
  }

  /** A running slot of the organization (of any, when not known) may be free: its first waiter looks. */
  free(orgId?: string): void {
    if (orgId === undefined) {
      for (const q of this.queues.values()) this.nudge(q[0] as Waiter);
      return;
    }
    const first = this.queues.get(orgId)?.[0];
    if (first) this.nudge(first);
  }

  /** The unit runs now (it counts as running, not starting): the wakes that wait for it need no slot. */
  running(orgId: string, unitId: string): void {
    this.starting.delete(unitId);
    for (const w of this.queues.get(orgId) ?? []) if (w.place.unitId === unitId) this.nudge(w);
  }

  private nudge(w: Waiter): void {
    w.nudged = true;
    w.wake?.();
  }

  /** The unit is admitted: it counts as running until it runs (`unreserve`). */
  reserve(orgId: string, unitId: string): void {
    this.starting.set(unitId, orgId);
  }

  /** The unit runs (it is counted as running from now) or its start failed; whether it held a slot. */
  unreserve(unitId: string): boolean {
    return this.starting.delete(unitId);
  }

  /** How many units of the organization are being started, but `except`. */
  startingOf(orgId: string, except: string): number {
    let n = 0;
    for (const [unitId, org] of this.starting) if (org === orgId && unitId !== except) n++;
    return n;
  }

  /** Marks an idle unit chosen to make room (until `madeRoom`): it is not counted, nor chosen again. */
  makingRoom(unitId: string): void {
    this.leaving.add(unitId);
  }

  madeRoom(unitId: string): void {
    this.leaving.delete(unitId);
  }

  isLeaving(unitId: string): boolean {
    return this.leaving.has(unitId);
  }
}
