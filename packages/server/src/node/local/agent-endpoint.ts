import { type AgentEndpoint, AgentTimeoutError } from "../../agent/deadline.js";
import type { Lifecycle } from "../../lifecycle/lifecycle.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { UnitRecord } from "../../store/records.js";

/**
 * The agent of `unit` as this node calls it: bounded by the server's agent timeouts; a missed
 * deadline marks the unit unhealthy (spec 2.4; the next wake restarts it) and fails the call with
 * an error that says so (issue #19 finding 8; the API answers it 504).
 */
export function agentEndpoint(
  runtime: Pick<UnitRuntime, "agentSocket" | "filesDevice">,
  lifecycle: Pick<Lifecycle, "agentTimeouts" | "agentTimedOut">,
  unit: Pick<UnitRecord, "id" | "name">,
): AgentEndpoint {
  return {
    path: runtime.agentSocket(unit.id),
    ...(runtime.filesDevice && { filesDevice: () => runtime.filesDevice?.(unit.id) }),
    timeouts: lifecycle.agentTimeouts,
    timedOut: (err) => {
      lifecycle.agentTimedOut(unit.id, err.message);
      return new AgentTimeoutError(
        err.phase,
        err.ms,
        `unit '${unit.name}' is marked unhealthy and the next request restarts it`,
      );
    },
  };
}
