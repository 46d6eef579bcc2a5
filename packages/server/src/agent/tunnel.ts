import { request } from "node:http";
import type { Socket } from "node:net";
import { TUNNEL_TARGET_HEADER, TUNNEL_UPGRADE } from "@ums/protocol";
import { type AgentEndpoint, boundAnswer, connectEndpoint } from "./deadline.js";
import { readAnswerError } from "./errors.js";
import { wrap } from "./http.js";

/** A TCP connection the agent made from inside its unit, and the address it reached. */
export interface AgentTunnel {
  /** Raw bytes to and from the target; `end()` is passed on as an end of stream (half-close). */
  readonly socket: Socket;
  /** `address:port` the agent connected to (e.g. `127.0.0.1:8080`). */
  readonly target: string;
}

/**
 * Asks the agent to connect to `host`:`port` from inside the unit (packages/agent/src/tunnel/tunnel.ts):
 * `GET /tunnel?host=…&port=…` with `Upgrade: ums-tcp` on its socket. The 101 comes once the agent is
 * connected; from then on the connection to the agent carries the target's bytes. The host itself
 * never connects to an address the unit chose. The 101 (or the refusal: a 400, a 502 with
 * UMS_TUNNEL_REFUSED or UMS_TUNNEL_UNREACHABLE) is the agent's first answer, bounded by the endpoint's
 * deadlines; the agent gives up connecting well before them.
 */
export function agentTunnel(ep: AgentEndpoint, host: string, port: number): Promise<AgentTunnel> {
  return new Promise((resolve, reject) => {
    const req = request({
      createConnection: (_o, done) => connectEndpoint(ep, done),
      method: "GET",
      path: `/tunnel?${new URLSearchParams({ host, port: String(port) })}`,
      headers: { connection: "Upgrade", upgrade: TUNNEL_UPGRADE },
    });
    const deadline = boundAnswer(req, ep);
    req.on("upgrade", (res, socket, head) => {
      deadline.answered();
      const s = socket as Socket;
      s.setTimeout(0);
      s.on("error", () => {}); // its user adds its own; until then an error must find a listener
      if (head.length > 0) s.unshift(head);
      const target = res.headers[TUNNEL_TARGET_HEADER];
      resolve({ socket: s, target: typeof target === "string" ? target.slice(0, 300) : `${host}:${port}` });
    });
    // The refusal's body is part of the agent's answer: the deadline stays armed until it has come.
    req.on("response", (res) => {
      readAnswerError(res)
        .then((err) => {
          deadline.answered();
          reject(err);
        })
        .catch(reject);
    });
    req.on("error", (err) => reject(wrap(err)));
    req.end();
  });
}
