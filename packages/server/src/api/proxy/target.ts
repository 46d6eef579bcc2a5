import { request } from "node:http";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { UnitRecord } from "../../store/records.js";

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

  constructor(private readonly runtime: Pick<UnitRuntime, "agentSocket">) {}

  readonly port: HttpTargetPort = (unit) => this.ports.get(unit.id) ?? this.load(unit.id);

  forget(unitId: string): void {
    this.ports.delete(unitId);
    this.gens.set(unitId, (this.gens.get(unitId) ?? 0) + 1);
  }

  private async load(unitId: string): Promise<number> {
    const gen = this.gens.get(unitId) ?? 0;
    let port: number;
    try {
      port = (await askAgent(this.runtime.agentSocket(unitId))) ?? DEFAULT_HTTP_PORT;
    } catch {
      return DEFAULT_HTTP_PORT; // not cached: asked again next time
    }
    if ((this.gens.get(unitId) ?? 0) === gen) this.ports.set(unitId, port);
    return port;
  }
}

function askAgent(socketPath: string): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method: "GET", path: "/services", timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => {
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
    req.on("timeout", () => req.destroy(new Error("the unit's agent did not answer in time")));
    req.on("error", reject);
    req.end();
  });
}
