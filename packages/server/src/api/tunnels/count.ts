import { ErrorCode } from "@ums/protocol";
import { ApiError } from "../errors.js";

/** The most TCP tunnels (`/proxy`) one unit may have open at once, counting those still opening. */
export const MAX_TUNNELS_PER_UNIT = 64;

/**
 * Open tunnels per unit, bounded (each holds a websocket, a connection to the agent and one in the
 * unit, and keeps the unit awake). One count per API instance, shared by both dialects' routes.
 */
export class TunnelCount {
  private readonly open = new Map<string, number>();

  constructor(readonly max = MAX_TUNNELS_PER_UNIT) {}

  /**
   * Counts one more tunnel of the unit and returns what gives it back (once, whoever calls it); a
   * unit that has `max` already is refused (429 UMS_TUNNEL_LIMIT) and nothing is counted.
   */
  reserve(unit: { id: string; name: string }): () => void {
    const n = this.open.get(unit.id) ?? 0;
    if (n >= this.max) {
      throw new ApiError(
        429,
        ErrorCode.TunnelLimit,
        `unit '${unit.name}' has ${this.max} open tunnels, the most one unit may have; close one first`,
      );
    }
    this.open.set(unit.id, n + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.open.get(unit.id) ?? 1) - 1;
      if (left <= 0) this.open.delete(unit.id);
      else this.open.set(unit.id, left);
    };
  }

  count(unitId: string): number {
    return this.open.get(unitId) ?? 0;
  }
}
