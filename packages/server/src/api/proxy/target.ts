import { request } from "node:http";
import type { Lifecycle } from "../../lifecycle/lifecycle.js";
import { type AgentEndpoint, boundAnswer, plainEndpoint } from "../../runtime/agent-client.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { UnitRecord } from "../../store/records.js";
import { ApiError } from "../errors.js";
import { agentEndpoint } from "../exec/agent-endpoint.js";

/** Spec 4.1: the port a unit's HTTP traffic goes to when no service claims one with `http_port`. */
export const DEFAULT_HTTP_PORT = 8080;

/** The unit's HTTP target port (called with the unit running and held). */
export type HttpTargetPort = (unit: UnitRecord) => Promise<number> | number;

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

  /**
   * `lifecycle` bounds the question to the agent with the server's timeouts and is told when the
   * agent misses them (the unit is then unhealthy; issue #19 finding 8).
   */
  constructor(
    private readonly runtime: Pick<UnitRuntime, "agentSocket">,
    private readonly lifecycle?: Pick<Lifecycle, "agentTimeouts" | "agentTimedOut">,
  ) {}

  readonly port: HttpTargetPort = (unit) => this.ports.get(unit.id) ?? this.load(unit);

  forget(unitId: string): void {
    this.ports.delete(unitId);
    this.gens.set(unitId, (this.gens.get(unitId) ?? 0) + 1);
  }

  private async load(unit: UnitRecord): Promise<number> {
    const unitId = unit.id;
    const gen = this.gens.get(unitId) ?? 0;
    const ep: AgentEndpoint = this.lifecycle
      ? agentEndpoint(this.runtime, this.lifecycle, unit)
      : plainEndpoint(this.runtime.agentSocket(unitId));
    let port: number;
    try {
      port = (await askAgent(ep)) ?? DEFAULT_HTTP_PORT;
    } catch (err) {
      // A stuck agent fails the request (504, the unit marked unhealthy) rather than guess a port.
      if (err instanceof ApiError) throw err;
      return DEFAULT_HTTP_PORT; // not cached: asked again next time
    }
    if ((this.gens.get(unitId) ?? 0) === gen) this.ports.set(unitId, port);
    return port;
  }
}

/** The `http_port` of the unit's services; the answer (its whole body) is bounded by `ep`'s timeouts. */
function askAgent(ep: AgentEndpoint): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: ep.path, method: "GET", path: "/services", agent: false }, (res) => {
      let body = "";
      res.on("error", reject);
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
        if (body.length > 1 << 20) req.destroy(new Error("the agent's list of services is over 1 MiB"));
      });
      res.on("end", () => {
        deadline.answered();
        if (res.statusCode === 404) return resolve(null); // an agent without services
        if (res.statusCode !== 200) return reject(new Error(`agent answered ${res.statusCode}`));
        try {
          const list = JSON.parse(body) as { http_port?: number | null }[];
          resolve(list.find((s) => typeof s.http_port === "number")?.http_port ?? null);
        } catch (err) {
          reject(err);
        }
      });
    });
    const deadline = boundAnswer(req, ep);
    req.on("error", reject);
    req.end();
  });
}
