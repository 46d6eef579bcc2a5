import { type IncomingMessage, request } from "node:http";

export interface AgentResponse {
  readonly status: number;
  /** The whole body, unless `stream` was asked for and the status is 200. */
  readonly body: string;
  readonly stream?: IncomingMessage;
}

/** A plain HTTP request to the unit agent over its Unix socket. */
export function agentRequest(
  socketPath: string,
  method: string,
  path: string,
  opts: { stream?: boolean; timeoutMs?: number } = {},
): Promise<AgentResponse> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, timeout: opts.timeoutMs ?? 10_000 }, (res) => {
      if (opts.stream && res.statusCode === 200) {
        res.socket?.setTimeout(0);
        return resolve({ status: 200, body: "", stream: res });
      }
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("the unit's agent did not answer in time")));
    req.on("error", reject);
    req.end();
  });
}
