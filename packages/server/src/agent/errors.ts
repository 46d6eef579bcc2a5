import type { IncomingMessage } from "node:http";
import { readLimited, TooLargeError } from "../util/read-limited.js";

/** At most this much of an error answer is read (the agent is the unit's: it may send anything). */
export const MAX_ANSWER_BYTES = 64 * 1024;
/** Marks an error a node sent for a unit it runs (issue #15, node/remote/wire.ts): passed on as it is. */
export const NODE_SENT = Symbol.for("ums.node-sent");

/** At most this much of a JSON answer is read, unless a call says otherwise. */
export const MAX_JSON_BYTES = 1 << 20;

/**
 * The agent answered a call with an error status. `code` is what its JSON body said: one of the
 * API's error codes (spec section 7), or an errno name for a filesystem operation (spec 4.4), with
 * the `path` it concerns. The API turns it into its answer (errors/node-errors.ts).
 */
export class AgentAnswerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
    readonly errors?: readonly string[],
    readonly path?: string,
  ) {
    super(message);
  }
}

/**
 * The agent could not be reached (no connection, or the connection broke before an answer). The
 * message names only the system error's code: its own message would name the agent's socket, a
 * host path.
 */
export class AgentUnreachableError extends Error {
  readonly code: string | undefined;

  constructor(cause: unknown) {
    const code = (cause as NodeJS.ErrnoException | undefined)?.code;
    const why = typeof code === "string" ? code : cause instanceof Error ? cause.message : String(cause);
    super(`the unit's agent is not reachable (${why})`);
    this.code = typeof code === "string" ? code : undefined;
  }

  /** Nothing listens on the agent's socket: its unit may have died since it was last seen alive. */
  get refused(): boolean {
    return this.code === "ECONNREFUSED" || this.code === "ENOENT";
  }
}

/** An error answer's body as the error to throw. */
export function answerError(status: number, body: string): AgentAnswerError {
  let parsed: { error?: unknown; errors?: unknown; code?: unknown; path?: unknown } | undefined;
  try {
    const v = JSON.parse(body);
    if (typeof v === "object" && v !== null) parsed = v;
  } catch {}
  const errors = Array.isArray(parsed?.errors) ? parsed.errors.map(String) : undefined;
  const message =
    typeof parsed?.error === "string"
      ? parsed.error
      : errors
        ? errors.join("; ")
        : `the unit's agent answered ${status}`;
  return new AgentAnswerError(
    status,
    typeof parsed?.code === "string" ? parsed.code : undefined,
    message,
    errors,
    typeof parsed?.path === "string" ? parsed.path : undefined,
  );
}

/** Reads a response's body as text, at most `limit` bytes (more is an error). */
export async function readText(res: IncomingMessage, limit = MAX_ANSWER_BYTES): Promise<string> {
  try {
    return await readLimited(res, limit);
  } catch (err) {
    if (err instanceof TooLargeError) {
      throw new AgentAnswerError(502, undefined, `the unit's agent sent an answer over ${limit} bytes`);
    }
    throw err;
  }
}

/** Reads an error response of the agent as the error to throw. */
export async function readAnswerError(res: IncomingMessage): Promise<AgentAnswerError> {
  let body = "";
  try {
    body = await readText(res);
  } catch {}
  return answerError(res.statusCode ?? 502, body);
}

/** An answer read whole, as its JSON value; an error status, or a body that is not JSON, is the error to throw. */
export function jsonAnswer<T>(status: number, body: string): T {
  if (status !== 200) throw answerError(status, body);
  try {
    return JSON.parse(body) as T;
  } catch {
    throw new AgentAnswerError(502, undefined, `the unit's agent answered ${status} without JSON`);
  }
}

/** A successful JSON answer's value; any other answer becomes the error to throw. */
export async function readJson<T = unknown>(res: IncomingMessage, limit = MAX_JSON_BYTES): Promise<T> {
  if (res.statusCode !== 200) throw await readAnswerError(res);
  return jsonAnswer<T>(200, await readText(res, limit));
}
