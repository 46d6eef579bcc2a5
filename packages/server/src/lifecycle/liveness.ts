import type { Logger } from "pino";
import { type AgentTimeouts, DEFAULT_AGENT_TIMEOUTS } from "../agent/deadline.js";
import { agentHealth } from "../agent/health.js";
import type { UnitRuntime } from "../runtime/runtime.js";
import type { UnitRecord } from "../store/records.js";
import type { UnitTable } from "./unit-table.js";

/** How long a stuck-looking agent gets to answer /health before its unit is restarted. */
const STUCK_PROBE_MS = 3000;

export interface HealthResult {
  readonly status: "healthy" | "hibernated" | "unhealthy";
  readonly reason: string | null;
}

const GONE = "the unit's processes are gone; the next request boots it again";

/**
 * Whether running units are alive and their agents answer (spec 2.4). A unit whose agent missed a
 * deadline is unhealthy (issue #19 finding 8): the next acquire restarts it unless its agent
 * answers by then (a stopped agent that was continued, say).
 */
export class Liveness {
  constructor(
    private readonly table: UnitTable,
    private readonly runtime: UnitRuntime,
    private readonly log: Logger,
    readonly timeouts: AgentTimeouts = DEFAULT_AGENT_TIMEOUTS,
  ) {}

  /** A request found the unit's agent gone: the next acquire checks (and reboots) it. */
  suspect(unitId: string): void {
    const t = this.table.get(unitId);
    if (t) t.aliveAt = 0;
  }

  /** A call to the unit's agent missed its deadline: the unit is unhealthy until its agent answers. */
  agentTimedOut(unitId: string, reason: string): void {
    const t = this.table.get(unitId);
    if (t?.status !== "running") return;
    if (t.unhealthy === undefined) {
      this.log.warn({ unit: t.name, unitId, reason }, "a unit's agent missed a deadline; the unit is unhealthy");
      t.unhealthy = reason;
    }
    t.aliveAt = 0;
  }

  /**
   * Whether a unit believed to run may serve requests: its processes are there and, when it was
   * marked unhealthy, its agent answers /health now (which clears the mark).
   */
  async usable(unitId: string): Promise<{ ok: true } | { ok: false; why: "dead" | "stuck"; reason?: string }> {
    if (!(await this.runtime.isAlive(unitId))) return { ok: false, why: "dead" };
    const unhealthy = this.table.get(unitId)?.unhealthy;
    if (unhealthy === undefined || (await this.agentAnswers(unitId))) return { ok: true };
    return { ok: false, why: "stuck", reason: unhealthy };
  }

  private async agentAnswers(unitId: string): Promise<boolean> {
    try {
      await agentHealth(this.runtime.agentSocket(unitId), Math.min(STUCK_PROBE_MS, this.timeouts.answerMs));
    } catch {
      return false;
    }
    const t = this.table.get(unitId);
    if (t) t.unhealthy = undefined;
    return true;
  }

  /** Spec 2.4: healthy when the agent answers in time; one that does not is marked as stuck. */
  async health(unit: UnitRecord, timeoutMs = 2000): Promise<HealthResult> {
    const status = this.table.statusOf(unit.id);
    if (status !== "running") return { status: "hibernated", reason: `unit is ${status}` };
    if (!(await this.runtime.isAlive(unit.id))) return { status: "unhealthy", reason: GONE };
    try {
      await agentHealth(this.runtime.agentSocket(unit.id), timeoutMs);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ECONNREFUSED" || code === "ENOENT") {
        // No agent listens: PID 1 follows it within moments, and then the unit's processes are gone.
        for (let i = 0; i < 10; i++) {
          if (!(await this.runtime.isAlive(unit.id))) return { status: "unhealthy", reason: GONE };
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      // The errno code, not the message: a socket error's message names a host path.
      const why = `agent did not answer: ${code ?? (err instanceof Error ? err.message : String(err))}`;
      this.agentTimedOut(unit.id, why);
      const first = this.table.get(unit.id)?.unhealthy ?? why;
      return { status: "unhealthy", reason: `${first}; the next request restarts the unit` };
    }
    const t = this.table.get(unit.id);
    if (t) t.unhealthy = undefined;
    return { status: "healthy", reason: null };
  }
}
