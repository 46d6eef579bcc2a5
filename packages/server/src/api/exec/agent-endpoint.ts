import { ErrorCode } from "@ums/protocol";
import type { Lifecycle } from "../../lifecycle/lifecycle.js";
import type { AgentEndpoint } from "../../runtime/agent-client.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { UnitRecord } from "../../store/records.js";
import { ApiError } from "../errors.js";

/**
 * The agent of `unit` as the API calls it: bounded by the server's agent timeouts; a missed
 * deadline marks the unit unhealthy (spec 2.4; the next request restarts it) and fails the call
 * with a 504 that says so (issue #19 finding 8).
 */
export function agentEndpoint(
  runtime: Pick<UnitRuntime, "agentSocket">,
  lifecycle: Pick<Lifecycle, "agentTimeouts" | "agentTimedOut">,
  unit: Pick<UnitRecord, "id" | "name">,
): AgentEndpoint {
  return {
    path: runtime.agentSocket(unit.id),
    timeouts: lifecycle.agentTimeouts,
    timedOut: (err) => {
      lifecycle.agentTimedOut(unit.id, err.message);
      return new ApiError(
        504,
        ErrorCode.AgentTimeout,
        `unit '${unit.name}': ${err.message}; the unit is marked unhealthy and the next request restarts it`,
      );
    },
  };
}
