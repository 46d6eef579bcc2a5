import { type IncomingMessage, request } from "node:http";
import { ErrorCode } from "@ums/protocol";
import { type AgentEndpoint, boundAnswer } from "../../runtime/agent-client.js";
import { ApiError } from "../errors.js";

/**
 * The longest a service's stop waits before SIGKILL (packages/agent/src/services/service.ts
 * STOP_GRACE_MS), plus a margin: a DELETE or PUT answers only once the old process is gone.
 */
const STOP_GRACE_MS = 10_000 + 2000;

/**
 * One request to the services routes of a unit's agent (packages/agent/src/services/http.ts) over
 * its socket. Resolves with the response once its head arrives: NDJSON answers stream on. The wait
 * for the head is bounded by the endpoint's timeouts (issue #19 finding 8), plus a stop's grace for
 * the calls that may wait on one.
 */
export function agentServices(
  ep: AgentEndpoint,
  method: string,
  path: string,
  body?: string,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = body === undefined ? {} : { "content-type": "application/json" };
    const req = request({ socketPath: ep.path, method, path: `/services${path}`, headers, agent: false }, (res) => {
      deadline.answered();
      resolve(res);
    });
    const deadline = boundAnswer(req, ep, method === "DELETE" || method === "PUT" ? STOP_GRACE_MS : 0);
    req.on("error", reject);
    req.end(body);
  });
}

export async function readAll(res: IncomingMessage): Promise<string> {
  let text = "";
  res.setEncoding("utf8");
  for await (const chunk of res) text += chunk;
  return text;
}

/** A non-2xx answer of the agent as the API error to throw (its code and message kept). */
export async function agentError(res: IncomingMessage): Promise<ApiError> {
  const status = res.statusCode ?? 502;
  let parsed: { error?: string; errors?: string[]; code?: string } = {};
  try {
    parsed = JSON.parse(await readAll(res));
  } catch {}
  const code = (parsed.code ?? ErrorCode.UnitUnavailable) as ErrorCode;
  const message = parsed.error ?? parsed.errors?.join("; ") ?? `the unit's agent answered ${status}`;
  if (status === 400 || status === 404 || status === 409) return new ApiError(status, code, message, parsed.errors);
  return new ApiError(502, ErrorCode.UnitUnavailable, `the unit's agent failed the operation (${status}): ${message}`);
}
