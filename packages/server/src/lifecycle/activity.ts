/**
 * What keeps a unit awake (docs/ARCHITECTURE.md section 5): requests in flight, attached exec sessions and
 * open proxied connections hold it; each hold is released exactly once.
 */
export class Activity {
  private readonly holds = new Map<string, number>();
  private readonly lastActive = new Map<string, number>();
  /** Told when a unit's last hold is released (it may now make room: capacity.ts). */
  constructor(private readonly idle: (unitId: string) => void = () => {}) {}

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
      if (n <= 0) this.idle(unitId);
    };
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
