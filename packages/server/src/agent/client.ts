import type { IncomingMessage } from "node:http";
import type WebSocket from "ws";
import type { AgentEndpoint } from "./deadline.js";
import { jsonAnswer } from "./errors.js";
import { agentFs, agentRead, type FsIdentity, type RawRead } from "./fs.js";
import { type AgentRequestOpts, agentCall, agentRequest } from "./http.js";
import { type AgentTunnel, agentTunnel } from "./tunnel.js";
import { connectAgent } from "./websocket.js";

/**
 * The one client of a unit's agent (packages/agent), over its Unix socket on the host: plain HTTP,
 * websockets (exec, file watch) and the filesystem upgrade. Every call is bounded by the endpoint's
 * deadlines (issue #19 finding 8). Failures are typed (errors.ts): the agent's own error answers
 * (`AgentAnswerError`), no connection (`AgentUnreachableError`), a missed deadline
 * (`AgentTimeoutError`); the API maps them to its answers in one place (errors/node-errors.ts).
 */
export interface UnitAgent {
  /** One request; resolves at the response head, the body streams on. */
  request(method: string, path: string, opts?: AgentRequestOpts): Promise<IncomingMessage>;
  /** A small JSON request whose whole answer comes within the deadlines; an error answer is thrown. */
  json<T = unknown>(method: string, path: string): Promise<T>;
  /** A websocket, returned paused (call `resume()` once listening). */
  websocket(path: string): Promise<WebSocket>;
  /** One filesystem operation run in the unit by the process of identity `as` (spec 4.4). */
  fs(
    as: FsIdentity,
    method: string,
    path: string,
    body?: import("node:stream").Readable | string,
    headers?: Record<string, string>,
  ): Promise<IncomingMessage>;
  /** A raw read of the file at `path` (spec 4.4): its size and the relay of its bytes. */
  read(as: FsIdentity, path: string): Promise<RawRead | IncomingMessage>;
  /** A TCP connection to `host`:`port` made by the agent from inside the unit (agent/tunnel.ts). */
  tunnel(host: string, port: number): Promise<AgentTunnel>;
}

/** The agent at `ep`, called directly. */
export function agentClient(ep: AgentEndpoint): UnitAgent {
  return {
    request: (method, path, opts) => agentRequest(ep, method, path, opts),
    async json<T>(method: string, path: string): Promise<T> {
      const answer = await agentCall(ep, method, path);
      return jsonAnswer<T>(answer.status, answer.body);
    },
    websocket: (path) => connectAgent(ep, path),
    fs: (as, method, path, body, headers) => agentFs(ep, as, method, path, body, headers),
    read: (as, path) => agentRead(ep, as, path),
    tunnel: (host, port) => agentTunnel(ep, host, port),
  };
}
