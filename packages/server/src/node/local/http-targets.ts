import type { UnitAgent } from "../../agent/client.js";
import { AgentTimeoutError } from "../../agent/deadline.js";
import { AgentAnswerError } from "../../agent/errors.js";
import type { UnitRecord } from "../../store/records.js";

/** Spec 4.1: the port a unit's HTTP traffic goes to when no service claims one with `http_port`. */
export const DEFAULT_HTTP_PORT = 8080;

/**
 * Spec 2.7: a service's `http_port` makes it the unit's HTTP target. The port is asked of the unit's
 * agent once and cached per unit, so proxied requests make no extra round trip; the cache is
 * forgotten when the unit's services change (through either API) and whenever the unit stops
 * (a boot or a restore may bring other definitions). A generation number keeps an answer that
 * raced with a change out of the cache.
 */
export class HttpTargets {
  private readonly ports = new Map<string, number>();
  private readonly gens = new Map<string, number>();

  /** The unit's HTTP target port (called with the unit running and held). */
  port(unit: UnitRecord, agent: UnitAgent): Promise<number> | number {
    return this.ports.get(unit.id) ?? this.load(unit, agent);
  }

  forget(unitId: string): void {
    this.ports.delete(unitId);
    this.gens.set(unitId, (this.gens.get(unitId) ?? 0) + 1);
  }

  private async load(unit: UnitRecord, agent: UnitAgent): Promise<number> {
    const unitId = unit.id;
    const gen = this.gens.get(unitId) ?? 0;
    let port: number;
    try {
      port = (await askAgent(agent)) ?? DEFAULT_HTTP_PORT;
    } catch (err) {
      // A stuck agent fails the request (504, the unit marked unhealthy) rather than guess a port.
      if (err instanceof AgentTimeoutError) throw err;
      return DEFAULT_HTTP_PORT; // not cached: asked again next time
    }
    if ((this.gens.get(unitId) ?? 0) === gen) this.ports.set(unitId, port);
    return port;
  }
}

/** The `http_port` of the unit's services (null: none claims one, or an agent without services). */
async function askAgent(agent: UnitAgent): Promise<number | null> {
  let list: { http_port?: number | null }[];
  try {
    list = await agent.json<{ http_port?: number | null }[]>("GET", "/services");
  } catch (err) {
    if (err instanceof AgentAnswerError && err.status === 404) return null;
    throw err;
  }
  return Array.isArray(list) ? (list.find((s) => typeof s?.http_port === "number")?.http_port ?? null) : null;
}
