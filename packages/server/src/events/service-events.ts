import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";
import { plainEndpoint } from "../agent/deadline.js";
import { agentRequest } from "../agent/http.js";
import type { Store } from "../store/store.js";
import type { EmitEvent } from "./event-log.js";

const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;
const MAX_LINE = 64 * 1024;

interface Follow {
  stopped: boolean;
  res?: IncomingMessage;
  timer?: NodeJS.Timeout;
}

/**
 * Issue #17: follows each running unit's agent (`GET /service-events`, NDJSON) and records its
 * services' crashes and restarts as `service.crashed` and `service.restarted` events (actor
 * `system`). Opened when a unit starts running (boot, re-adoption), closed when it stops; a
 * connection that breaks is made again after 1 s, doubling to 30 s. An agent that has no such
 * route (404) is not asked again until the unit boots again.
 */
export class ServiceEventFollower {
  private readonly follows = new Map<string, Follow>();

  constructor(
    private readonly deps: {
      readonly store: Store;
      readonly agentSocket: (unitId: string) => string;
      readonly emit: EmitEvent;
      readonly log: Logger;
    },
  ) {}

  open(unitId: string): void {
    if (this.follows.has(unitId)) return;
    const f: Follow = { stopped: false };
    this.follows.set(unitId, f);
    this.follow(unitId, f, RETRY_FIRST_MS);
  }

  close(unitId: string): void {
    const f = this.follows.get(unitId);
    if (!f) return;
    this.follows.delete(unitId);
    f.stopped = true;
    if (f.timer) clearTimeout(f.timer);
    f.res?.destroy();
  }

  closeAll(): void {
    for (const id of [...this.follows.keys()]) this.close(id);
  }

  private follow(unitId: string, f: Follow, retryMs: number): void {
    this.run(unitId, f, retryMs).catch((err) =>
      this.deps.log.error({ err, unitId }, "following a unit's service events stopped"),
    );
  }

  private async run(unitId: string, f: Follow, retryMs: number): Promise<void> {
    let next = retryMs;
    try {
      const unit = await this.deps.store.units.getById(unitId);
      if (!unit || f.stopped) return;
      const res = await agentRequest(plainEndpoint(this.deps.agentSocket(unitId)), "GET", "/service-events");
      if (f.stopped) {
        res.destroy();
        return;
      }
      if (res.statusCode === 404) {
        res.resume();
        return; // an agent from before this route
      }
      if (res.statusCode !== 200) throw new Error(`the agent answered ${res.statusCode}`);
      f.res = res;
      next = RETRY_FIRST_MS;
      let buf = "";
      res.setEncoding("utf8");
      await new Promise<void>((resolve) => {
        res.on("data", (chunk: string) => {
          buf += chunk;
          let nl = buf.indexOf("\n");
          while (nl >= 0) {
            this.line(unit.orgId, unit.name, buf.slice(0, nl));
            buf = buf.slice(nl + 1);
            nl = buf.indexOf("\n");
          }
          if (buf.length > MAX_LINE) buf = "";
        });
        res.on("error", () => resolve());
        res.on("close", () => resolve());
      });
    } catch (err) {
      if (!f.stopped) this.deps.log.debug({ err, unitId }, "following a unit's service events failed; trying again");
      next = Math.min(retryMs * 2, RETRY_MAX_MS);
    }
    if (f.stopped) return;
    f.timer = setTimeout(() => this.follow(unitId, f, next), next);
    f.timer.unref();
  }

  private line(orgId: string, unit: string, text: string): void {
    let e: Record<string, unknown>;
    try {
      e = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof e.service !== "string") return;
    // What a unit says about itself is bounded and typed before it is recorded.
    const service = e.service.slice(0, 128);
    if (e.type === "crashed") {
      this.deps.emit({
        orgId,
        type: "service.crashed",
        unit,
        actor: "system",
        data: {
          service,
          exit_code: typeof e.exit_code === "number" ? e.exit_code : null,
          restart_in_ms: typeof e.restart_in_ms === "number" ? e.restart_in_ms : null,
          ...(typeof e.error === "string" && { error: e.error.slice(0, 500) }),
        },
      });
    } else if (e.type === "restarted") {
      this.deps.emit({
        orgId,
        type: "service.restarted",
        unit,
        actor: "system",
        data: { service, restart_count: typeof e.restart_count === "number" ? e.restart_count : null },
      });
    }
  }
}
