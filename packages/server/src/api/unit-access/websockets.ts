import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import type {} from "@fastify/websocket";
import { ErrorCode } from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import type WebSocket from "ws";
import { metrics } from "../../metrics/server-metrics.js";
import { readAnswerError } from "../../node/errors.js";
import type { UnitLease } from "../../node/unit-node.js";
import { ApiError } from "../errors.js";
import { firstCall } from "./lease.js";

/**
 * Issue #20 part 5: the most websockets to its agent one unit may have open at once (attached exec
 * sessions, file and port watches; TCP tunnels have their own cap, tunnels/count.ts). Each holds a
 * socket on the host, one in the unit and keeps the unit awake.
 */
export const MAX_WEBSOCKETS_PER_UNIT = 128;
const openPerUnit = new Map<string, number>();

/** Counts one more agent websocket of the unit, or refuses (429) at the cap; returns its release. */
function reserveWebsocket(unit: { id: string; name: string }): () => void {
  const n = openPerUnit.get(unit.id) ?? 0;
  if (n >= MAX_WEBSOCKETS_PER_UNIT) {
    throw new ApiError(
      429,
      ErrorCode.WebsocketLimit,
      `unit '${unit.name}' has ${MAX_WEBSOCKETS_PER_UNIT} open websockets (exec sessions, watches), the most one unit may have; close one first`,
    );
  }
  openPerUnit.set(unit.id, n + 1);
  let given = false;
  return () => {
    if (given) return;
    given = true;
    const left = (openPerUnit.get(unit.id) ?? 1) - 1;
    if (left <= 0) openPerUnit.delete(unit.id);
    else openPerUnit.set(unit.id, left);
  };
}

/** The agent websockets the unit has open (tests). */
export function openWebsockets(unitId: string): number {
  return openPerUnit.get(unitId) ?? 0;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The agent websocket opened before a client websocket is accepted (holdAgentSocket). */
    agentSocket?: WebSocket;
    releaseUnit?: () => void;
  }
}

/** Agent websockets a `joinWebsockets` took over (from then on it owns their end). */
const joined = new WeakSet<WebSocket>();

/**
 * Parks the agent websocket a preHandler opened, and the unit hold that goes with it, on `req`
 * until the route's wsHandler joins it to the client's. A client that leaves before its upgrade is
 * completed never reaches the wsHandler: its socket's close then ends the agent's websocket and
 * releases the unit, which would otherwise stay open and awake for good.
 */
export function holdAgentSocket(req: FastifyRequest, agent: WebSocket, release: () => void): void {
  let released = false;
  const releaseOnce = () => {
    if (released) return;
    released = true;
    release();
  };
  req.agentSocket = agent;
  req.releaseUnit = releaseOnce;
  const client = req.raw.socket;
  const abandon = () => {
    if (joined.has(agent)) return;
    agent.terminate();
    releaseOnce();
  };
  if (client.destroyed) abandon();
  else client.once("close", abandon);
}

/**
 * Joins a client websocket to the agent's, message for message (binary stays binary, text stays
 * text) so the exec framing (spec 4.3) passes through untouched; close codes too. Errors on either
 * side end both (issue #19 finding 6: every socket has an 'error' listener).
 */
export function joinWebsockets(client: WebSocket, agent: WebSocket, done: () => void): void {
  joined.add(agent);
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    done();
  };
  agent.on("error", () => client.terminate());
  client.on("error", () => agent.terminate());
  if (agent.readyState !== agent.OPEN) {
    // The agent went away between its handshake and this one.
    if (client.readyState === client.OPEN) client.close(1011, "the unit's agent closed the session");
    finish();
    return;
  }
  forward(agent, client);
  forward(client, agent);
  agent.on("close", (code, reason) => {
    if (client.readyState === client.OPEN) client.close(validCode(code), reason);
    finish();
  });
  client.on("close", (code, reason) => {
    if (agent.readyState === agent.OPEN || agent.readyState === agent.CONNECTING) agent.close(validCode(code), reason);
    finish();
  });
  agent.resume();
}

/**
 * What one side sends is sent on to the other, message for message; when the other does not read
 * (its socket's send buffer over {@link HIGH_WATER_BYTES}), the sending side is paused until that
 * buffer drains, so a client that never reads holds the unit's output back in the unit (TCP
 * backpressure), never in ums serve's memory (issue #20 part 3).
 */
function forward(from: WebSocket, to: WebSocket): void {
  from.on("message", (data, isBinary) => {
    if (to.readyState !== to.OPEN) return;
    to.send(data, { binary: isBinary });
    if (to.bufferedAmount > HIGH_WATER_BYTES && !from.isPaused) {
      from.pause();
      const socket = (to as unknown as { _socket?: Socket })._socket;
      const resume = () => {
        if (to.readyState !== to.OPEN) return;
        if (to.bufferedAmount > HIGH_WATER_BYTES && socket && !socket.destroyed) socket.once("drain", resume);
        else from.resume();
      };
      if (socket && !socket.destroyed) socket.once("drain", resume);
    }
  });
}

/** Bytes a websocket may have waiting to be sent before what feeds it is paused. */
export const HIGH_WATER_BYTES = 1 << 20;

/** Codes a peer may send (RFC 6455 §7.4); 1005/1006 are only reported, never sent. */
function validCode(code: number): number {
  return code === 1000 ||
    (code >= 3000 && code <= 4999) ||
    (code >= 1001 && code <= 1014 && code !== 1005 && code !== 1006)
    ? code
    : 1000;
}

/** The wsHandler of a route whose preHandler held an agent websocket: joins the client's to it. */
export function joinHeldSocket(client: WebSocket, req: FastifyRequest): void {
  joinWebsockets(client, req.agentSocket as WebSocket, req.releaseUnit ?? (() => {}));
}

/**
 * Opens the agent websocket at `path` for a client's upgrade and parks it (holdAgentSocket) with
 * the lease; a failure releases the unit and is thrown before any upgrade (an HTTP error answer).
 */
export async function holdUnitWebsocket(req: FastifyRequest, lease: UnitLease, path: string): Promise<void> {
  holdAgentSocket(req, await leasedWebsocket(lease, path), () => lease.release());
}

/** A place under the unit's cap (its release), or the 429 thrown with the lease released. */
function reserveOrRelease(lease: UnitLease): () => void {
  try {
    return reserveWebsocket(lease.unit);
  } catch (err) {
    lease.release();
    throw err;
  }
}

/**
 * The agent websocket at `path`, counted against the unit's cap until it closes; a failure to open
 * it (or a unit at its cap) releases the lease.
 */
export async function leasedWebsocket(lease: UnitLease, path: string): Promise<WebSocket> {
  const release = reserveOrRelease(lease);
  try {
    const ws = await firstCall(lease, () => lease.agent.websocket(path));
    ws.once("close", release);
    if (path.startsWith("/exec")) {
      // An exec session relayed (HTTP or websocket, started or attached): open until its socket closes.
      metrics.execSessionsOpen++;
      ws.once("close", () => metrics.execSessionsOpen--);
    }
    return ws;
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * A non-TTY exec as the agent's plain HTTP request (`POST /exec`: no websocket handshake on either
 * side), counted like an exec websocket until its answer closes; `stdin` goes to the agent once it
 * answered 200. Null when the agent predates that route (a unit booted by an older ums answers 404):
 * the caller then opens the websocket, with the lease still held and `stdin` untouched. Any other
 * refusal releases the lease and is thrown.
 */
export async function leasedHttpExec(
  lease: UnitLease,
  path: string,
  stdin?: Readable,
): Promise<IncomingMessage | null> {
  const release = reserveOrRelease(lease);
  let answer: IncomingMessage;
  try {
    answer = await firstCall(lease, () => lease.agent.request("POST", path, stdin && { bodyAfterHead: stdin }));
  } catch (err) {
    release();
    throw err;
  }
  if (answer.statusCode === 404) {
    answer.resume();
    release();
    return null;
  }
  if (answer.statusCode !== 200) {
    release();
    lease.release();
    throw await readAnswerError(answer);
  }
  metrics.execSessionsOpen++;
  answer.once("close", () => {
    metrics.execSessionsOpen--;
    release();
  });
  return answer;
}
