import { type IncomingMessage, request } from "node:http";
import { type AgentEndpoint, boundAnswer } from "../../runtime/agent-client.js";

export interface AgentResponse {
  readonly status: number;
  /** The whole body, unless `stream` was asked for and the status is 200. */
  readonly body: string;
  readonly stream?: IncomingMessage;
}

/**
 * A plain HTTP request to the unit agent over its Unix socket. The endpoint's timeouts bound the
 * wait for the answer: the response head of a stream, the whole body otherwise.
 */
export function agentRequest(
  ep: AgentEndpoint,
  method: string,
  path: string,
  opts: { stream?: boolean } = {},
): Promise<AgentResponse> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: ep.path, method, path, agent: false }, (res) => {
      res.on("error", reject);
      if (opts.stream && res.statusCode === 200) {
        deadline.answered();
        return resolve({ status: 200, body: "", stream: res });
      }
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => {
        deadline.answered();
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    const deadline = boundAnswer(req, ep);
    req.on("error", reject);
    req.end();
  });
}
