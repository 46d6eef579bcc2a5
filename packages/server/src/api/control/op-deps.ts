import { errorAnswer } from "../../errors/respond.js";
import type { UnitLease } from "../../node/unit-node.js";
import type { OpContext, OpFailure } from "./session.js";

/** What the control websocket's ops need of the request that opened it (routes.ts). */
export interface OpDeps {
  /** The unit's lease for one op: the token checked again, the unit looked up and woken. */
  leaseUnit(): Promise<UnitLease>;
  /** A fault of the server (a bug), for the log; the client is told only that it happened. */
  logFault(err: unknown): void;
}

/** An error as `op.error`'s args: what the API would answer for it (errors/respond.ts). */
export function failureOf(err: unknown): { failure: OpFailure; internal: boolean } {
  const answer = errorAnswer(err);
  const body = answer.body as { error?: string; errors?: string[]; code: string; path?: string };
  const failure: OpFailure = {
    error: body.error ?? body.errors?.join("; ") ?? "failed",
    code: body.code,
    status: answer.status,
    ...(body.path !== undefined && { path: body.path }),
    ...(body.errors !== undefined && { errors: body.errors }),
  };
  return { failure, internal: answer.internal };
}

/** Ends the op with `err`, logged when it is the server's fault. */
export function failOp(ctx: OpContext, deps: OpDeps, err: unknown): OpFailure {
  const { failure, internal } = failureOf(err);
  if (internal) deps.logFault(err);
  ctx.fail(failure);
  return failure;
}
