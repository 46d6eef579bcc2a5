import { ErrorCode, FS_RESERVED_PATH, fsErrorStatus } from "@ums/protocol";
import { AgentTimeoutError } from "../agent/deadline.js";
import { AgentAnswerError, AgentUnreachableError } from "../agent/errors.js";
import {
  ActiveCheckpointError,
  ImageGoneError,
  ImageInUseError,
  RunningLimitError,
  TemplateGoneError,
  UnitBusyError,
  UnitDeletedError,
  UnitMovingError,
  UpgradeRefusedError,
} from "../lifecycle/errors.js";
import { NoNodeError, UnitUnavailableError } from "../node/errors.js";
import { CommandError } from "../runtime/exec/host-command.js";
import { ImageArchiveError } from "../runtime/image/oci/index.js";
import { ApiError, isErrno } from "./api-error.js";

/**
 * The one mapping of a node's errors (node/errors.ts: the lifecycle's, and the unit agent's) to
 * API answers. Undefined for any other error.
 */
export function fromNodeError(err: unknown): ApiError | undefined {
  if (poolFull(err)) {
    return new ApiError(
      507,
      ErrorCode.PoolFull,
      "the host's unit pool is full: delete checkpoints or units you no longer need (or the operator grows the pool), then try again",
    );
  }
  if (err instanceof AgentAnswerError) return fromAgentAnswer(err);
  if (err instanceof AgentTimeoutError) return new ApiError(504, ErrorCode.AgentTimeout, err.message);
  if (err instanceof AgentUnreachableError) return new ApiError(502, ErrorCode.UnitUnavailable, err.message);
  if (err instanceof UnitDeletedError) return new ApiError(404, ErrorCode.UnitNotFound, err.message);
  if (err instanceof RunningLimitError) return new ApiError(409, ErrorCode.RunningLimit, err.message);
  if (err instanceof UnitUnavailableError) return new ApiError(502, ErrorCode.UnitUnavailable, err.message);
  if (err instanceof ActiveCheckpointError) return new ApiError(409, ErrorCode.CheckpointActive, err.message);
  if (err instanceof TemplateGoneError) return new ApiError(404, ErrorCode.TemplateNotFound, err.message);
  if (err instanceof ImageGoneError) return new ApiError(404, ErrorCode.ImageNotFound, err.message);
  if (err instanceof ImageInUseError) return new ApiError(409, ErrorCode.ImageInUse, err.message);
  if (err instanceof UpgradeRefusedError) {
    return new ApiError(409, ErrorCode.UpgradeRefused, err.message, [...err.reasons]);
  }
  if (err instanceof ImageArchiveError) return new ApiError(400, ErrorCode.ImageInvalid, err.message);
  if (err instanceof NoNodeError) return new ApiError(503, ErrorCode.NoNode, err.message);
  if (err instanceof UnitBusyError) return new ApiError(409, ErrorCode.UnitBusy, err.message);
  if (err instanceof UnitMovingError) return new ApiError(503, ErrorCode.UnitMoving, err.message);
  return undefined;
}

/** A host command (btrfs, mostly) or write that failed for want of space in the pool, also as the cause of a start failure. */
function poolFull(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof CommandError && /No space left on device|ENOSPC/.test(`${e.stderr}\n${e.stdout}`)) return true;
    // A write of the host's own into a unit's disk (its boot's files, say).
    if ((e as NodeJS.ErrnoException).code === "ENOSPC") return true;
  }
  return false;
}

/**
 * What the agent answered, as the API answers it: a filesystem error keeps its errno and path
 * (spec 4.4); the agent's refusals of the request (4xx) keep their status, code and message; any
 * other failure of the agent is the unit's (502).
 */
function fromAgentAnswer(err: AgentAnswerError): ApiError {
  const code = err.code;
  if (code !== undefined && (isErrno(code) || code === FS_RESERVED_PATH)) {
    return new ApiError(fsErrorStatus(code), code, err.message, undefined, undefined, { path: err.path });
  }
  if (err.status >= 400 && err.status < 500) {
    return new ApiError(err.status, code ?? ErrorCode.Validation, err.message, err.errors);
  }
  return new ApiError(
    502,
    ErrorCode.UnitUnavailable,
    `the unit's agent failed the operation (${err.status}): ${err.message}`,
  );
}
