import { type IncomingMessage, request } from "node:http";
import { ErrorCode } from "@ums/protocol";
import { ApiError } from "../errors.js";

/**
 * One request to the services routes of a unit's agent (packages/agent/src/services/http.ts) over
 * its socket. Resolves with the response once its head arrives: NDJSON answers stream on.
 */
export function agentServices(
  socketPath: string,
  method: string,
  path: string,
  body?: string,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = body === undefined ? {} : { "content-type": "application/json" };
    const req = request({ socketPath, method, path: `/services${path}`, headers, agent: false }, (res) => {
      req.setTimeout(0);
      resolve(res);
    });
    // A stop waits for the service (up to its grace), so the head may take a while, never a minute.
    req.setTimeout(60_000, () => req.destroy(new Error("the unit's agent did not answer in time")));
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
