/**
 * What keeps a unit awake (docs/ARCHITECTURE.md section 5): requests in flight, attached exec sessions and
 * open proxied connections hold it; each hold is released exactly once.
 */
export class Activity {
  private readonly holds = new Map<string, number>();
  private readonly lastActive = new Map<string, number>();
  /** Called once each, at the next release of a unit's last hold. */
  private idleWaiters: (() => void)[] = [];

  hold(unitId: string): () => void {
    this.holds.set(unitId, (this.holds.get(unitId) ?? 0) + 1);
    this.touch(unitId);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.holds.get(unitId) ?? 1) - 1;
      if (n <= 0) this.holds.delete(unitId);
      else this.holds.set(unitId, n);
      this.touch(unitId);
      if (n <= 0) this.wakeIdleWaiters();
    };
  }

  /** Resolves when some unit's last hold is released (a running slot may be free) or after `ms`. */
  nextIdle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiter = () => {
        clearTimeout(timer);
        this.idleWaiters = this.idleWaiters.filter((w) => w !== waiter);
        resolve();
      };
      const timer = setTimeout(waiter, ms);
      this.idleWaiters.push(waiter);
    });
  }

  private wakeIdleWaiters(): void {
    for (const w of [...this.idleWaiters]) w();
  }

  touch(unitId: string, now = Date.now()): void {
    this.lastActive.set(unitId, now);
  }

  isHeld(unitId: string): boolean {
    return (this.holds.get(unitId) ?? 0) > 0;
  }

  /** Milliseconds since the unit was last active (Infinity when never seen). */
  idleFor(unitId: string, now = Date.now()): number {
    const t = this.lastActive.get(unitId);
    return t === undefined ? Number.POSITIVE_INFINITY : now - t;
  }

  forget(unitId: string): void {
    this.holds.delete(unitId);
    this.lastActive.delete(unitId);
  }
}
