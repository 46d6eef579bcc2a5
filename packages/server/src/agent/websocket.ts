import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import WebSocket from "ws";
import { agentSpan } from "../tracing/tracing.js";
import { AgentDeadline, type AgentEndpoint, connectEndpoint } from "./deadline.js";
import { answerError, MAX_ANSWER_BYTES } from "./errors.js";
import { wrap } from "./http.js";

/**
 * Opens a websocket to the unit agent's exec endpoint over its Unix socket (spec 4.3). It comes back
 * paused: frames that arrived with the handshake (a quick command's whole output) wait until the
 * caller has its listeners on and calls `resume()`.
 *
 * Fails with `AgentAnswerError` when the agent answers the upgrade with anything but 101, and with the
 * endpoint's timeout error when it does not connect or answer in time (issue #19 finding 8). The
 * socket always has an 'error' listener (issue #19 finding 6): a handshake aborted with `terminate()`
 * reports its error on the next tick, and an error after `open` must not crash the server before
 * the caller has added its own listeners.
 */
export function connectAgent(ep: AgentEndpoint, path: string): Promise<WebSocket> {
  // Issue #17: when tracing, a span from the upgrade to the websocket's close.
  const span = agentSpan("GET", path);
  return new Promise<WebSocket>((resolve, reject) => {
    let settled = false;
    const deadline = new AgentDeadline(ep, (err) => fail(err));
    const ws = new WebSocket(`ws+unix://${ep.path}:${path}`, {
      perMessageDeflate: false,
      createConnection: (_o: unknown, done: (err: Error | null, socket: Duplex) => void) => {
        const socket = connectEndpoint(ep, (err, s) => {
          if (s) deadline.watch(s as Socket);
          done(err, s);
        });
        if (socket) deadline.watch(socket);
        return socket;
      },
    });
    function fail(err: Error): void {
      if (settled) return;
      settled = true;
      deadline.answered();
      ws.terminate();
      span?.end(err.message);
      reject(wrap(err));
    }
    ws.on("error", fail);
    ws.once("open", () => {
      if (settled) return ws.terminate();
      settled = true;
      deadline.answered();
      ws.pause();
      if (span) ws.once("close", () => span.end());
      resolve(ws);
    });
    // The refusal's body is part of the agent's answer: the deadline stays armed until it has come.
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        if (body.length < MAX_ANSWER_BYTES) body += d.slice(0, MAX_ANSWER_BYTES - body.length);
      });
      res.on("error", fail);
      res.on("end", () => fail(answerError(res.statusCode ?? 0, body)));
    });
  });
}
