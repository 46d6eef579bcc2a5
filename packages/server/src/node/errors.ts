// The errors a node's calls fail with, typed so that the API maps each to its answer in one place
// (errors/node-errors.ts). A node over the network sends them as their `name` and fields.
export { AgentTimeoutError } from "../agent/deadline.js";
export { AgentAnswerError, AgentUnreachableError, readAnswerError, readJson } from "../agent/errors.js";
export {
  ActiveCheckpointError,
  RunningLimitError,
  TemplateGoneError,
  UnitDeletedError,
} from "../lifecycle/errors.js";

/** The unit cannot be reached now (the API answers 502 UMS_UNIT_UNAVAILABLE with the message). */
export class UnitUnavailableError extends Error {}

/** The unit could not be started (its boot failed); `cause` says why. */
export class UnitStartError extends UnitUnavailableError {
  constructor(
    readonly unitName: string,
    cause: unknown,
  ) {
    super(`unit '${unitName}' could not be started: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
  }
}

/** Issue #15: the unit's node cannot be reached (down, stopped, unreachable); the API answers 502. */
export class NodeUnreachableError extends UnitUnavailableError {
  constructor(
    message: string,
    /** The node's id. */
    readonly nodeId: string,
  ) {
    super(message);
  }
}

/** Issue #15: no node can take a unit now; the message counts why of each node (placement.ts). */
export class NoNodeError extends Error {}
