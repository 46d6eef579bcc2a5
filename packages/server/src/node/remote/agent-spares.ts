import { connect, type Socket } from "node:net";

/** How long a spare connection waits for the next wake of its unit. */
export const SPARE_MS = 2_000;
/** How long a spare's connect may take before it is given up. */
const CONNECT_MS = 1_000;

/**
 * Issue #15: connections to units' agents opened ahead of need, one per unit, for the node
 * endpoint's wakes (node-endpoint.ts wakeOn). A wake through an API replica answers only once it
 * holds its agent connection (an agent that refuses is the wake's error, with the unit checked and
 * booted again), so the connect was part of every call's latency (~0.3 ms here). After a unit's
 * wake, another connection is opened in the background and kept for SPARE_MS; the unit's next
 * wake takes it. A spare that ended (the unit stopped, its agent restarted) is dropped, and the
 * wake connects as before. Connecting has no effect on the unit: nothing is sent until a wake
 * takes the connection and relays an API's call to it.
 */
export class AgentSpares {
  private readonly spares = new Map<string, { socket: Socket; timer: NodeJS.Timeout }>();
  private readonly opening = new Set<string>();
  private closed = false;

  /** The unit's spare connection, when it has one that is still open. */
  take(unitId: string): Socket | undefined {
    const spare = this.spares.get(unitId);
    if (!spare) return undefined;
    this.drop(unitId, spare);
    const { socket } = spare;
    if (socket.destroyed || socket.readableEnded || !socket.writable) {
      socket.destroy();
      return undefined;
    }
    return socket;
  }

  /** Opens a spare connection to the agent listening at `path` for unit `unitId`, unless it has one. */
  refill(unitId: string, path: string): void {
    if (this.closed || this.spares.has(unitId) || this.opening.has(unitId)) return;
    this.opening.add(unitId);
    const socket = connect({ path });
    // Errors while it waits (the agent gone) only drop it.
    socket.on("error", () => {});
    const timer = setTimeout(() => socket.destroy(), CONNECT_MS);
    timer.unref();
    let settled = false;
    const settle = (ok: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.opening.delete(unitId);
      if (!ok || this.closed || this.spares.has(unitId)) return void socket.destroy();
      const spare = {
        socket,
        timer: setTimeout(() => {
          this.drop(unitId, spare);
          socket.destroy();
        }, SPARE_MS),
      };
      spare.timer.unref();
      this.spares.set(unitId, spare);
      socket.once("close", () => this.drop(unitId, spare));
    };
    socket.once("connect", () => settle(true));
    socket.once("close", () => settle(false));
  }

  /** How many spare connections are open (tests). */
  get size(): number {
    return this.spares.size;
  }

  /** Closes every spare; none is opened from now on. */
  close(): void {
    this.closed = true;
    for (const [unitId, spare] of this.spares) {
      this.drop(unitId, spare);
      spare.socket.destroy();
    }
  }

  private drop(unitId: string, spare: { socket: Socket; timer: NodeJS.Timeout }): void {
    clearTimeout(spare.timer);
    if (this.spares.get(unitId) === spare) this.spares.delete(unitId);
  }
}
