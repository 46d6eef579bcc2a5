/** The most TCP tunnels (`/proxy`) one unit may have open at once, counting those still opening. */
export const MAX_TUNNELS_PER_UNIT = 64;

/**
 * Open tunnels per unit, bounded (each holds a websocket, a connection to the agent and one in the
 * unit, and keeps the unit awake). One count per API instance, shared by both dialects' routes.
 */
export class TunnelCount {
  private readonly open = new Map<string, number>();

  constructor(readonly max = MAX_TUNNELS_PER_UNIT) {}

  /** Counts one more tunnel of the unit; false (nothing counted) when it has `max` already. */
  take(unitId: string): boolean {
    const n = this.open.get(unitId) ?? 0;
    if (n >= this.max) return false;
    this.open.set(unitId, n + 1);
    return true;
  }

  /** One tunnel of the unit is gone; returns a function that does it once, whoever calls it. */
  giver(unitId: string): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const n = (this.open.get(unitId) ?? 1) - 1;
      if (n <= 0) this.open.delete(unitId);
      else this.open.set(unitId, n);
    };
  }

  count(unitId: string): number {
    return this.open.get(unitId) ?? 0;
  }
}
