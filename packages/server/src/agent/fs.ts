import { type IncomingMessage, request, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { type AgentEndpoint, boundAnswer, connectEndpoint } from "./deadline.js";
import { AgentAnswerError, readAnswerError } from "./errors.js";
import { wrap } from "./http.js";
import { RelaySocket, relayOf, relayPlain } from "./relay.js";

/** Who runs a filesystem operation in the unit: the unit user, or root (`asRoot`, spec 4.4). */
export type FsIdentity = "user" | "root";

/** Bytes of a streamed request body (a write) that may wait for the agent's socket: bounded, flat. */
const BODY_AHEAD_BYTES = 1024 * 1024;

/** Upgrade protocol of a raw read (packages/agent/src/fs/raw-read.ts). */
const RAW_READ = "ums-fs-bytes";

/**
 * Opens a connection to the unit's filesystem process of one identity: `GET /fs/connect?as=…` with
 * `Upgrade: ums-fs` on the agent's socket; after the 101 the agent has handed the connection to that
 * process (the unit user's worker, or the agent itself for root), which serves plain HTTP on it
 * (packages/agent/src/fs/router.ts). File bytes then flow between this server and that process only.
 * The 101 is the agent's first answer: the endpoint's timeouts bound the wait for it (issue #19
 * finding 8); the operation that follows is bounded by its own idle timeout (`agentFs`, `agentRead`).
 */
function connectFs(ep: AgentEndpoint, as: FsIdentity, own?: Socket): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const req = request({
      createConnection: (_o, done) => own ?? connectEndpoint(ep, done),
      method: "GET",
      path: `/fs/connect?as=${as}`,
      headers: { connection: "Upgrade", upgrade: "ums-fs" },
    });
    const deadline = boundAnswer(req, ep);
    req.on("upgrade", (_res, socket, head) => {
      deadline.answered();
      socket.setTimeout(0);
      if (head.length > 0) socket.unshift(head);
      resolve(socket as Socket);
    });
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        if (body.length < 4096) body += d;
      });
      res.on("error", (err) => reject(wrap(err)));
      res.on("end", () =>
        reject(
          new AgentAnswerError(
            502,
            undefined,
            `the agent refused the filesystem connection (${res.statusCode}): ${body.slice(0, 4096)}`,
          ),
        ),
      );
    });
    req.on("error", (err) => reject(wrap(err)));
    req.end();
  });
}

/**
 * One filesystem request, run in the unit by the process of identity `as`. The request body (a
 * stream for writes, a string for JSON operations) and the response are streamed: nothing is
 * buffered but JSON. Resolves with the response once its head arrives.
 */
export async function agentFs(
  ep: AgentEndpoint,
  as: FsIdentity,
  method: string,
  path: string,
  body?: Readable | string,
  headers: Record<string, string> = {},
): Promise<IncomingMessage> {
  const socket = await connectFs(ep, as);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        createConnection: () => socket,
        method,
        path,
        headers: { ...headers, connection: "close" },
        // A streamed body (a write): up to this much waits here while the agent's socket is full, so
        // that the client's bytes keep coming (a 64 KiB read at a time) instead of stopping at each.
        ...(typeof body === "object" && { highWaterMark: BODY_AHEAD_BYTES }),
      },
      (res) => resolve(res),
    );
    // No answer head within a minute: the unit is stuck (a large upload keeps the socket busy, not idle).
    req.setTimeout(60_000, () => req.destroy(new Error("the unit's agent did not answer in time")));
    req.on("response", () => req.setTimeout(0));
    req.on("error", (err) => reject(wrap(err)));
    if (body === undefined) req.end();
    else if (typeof body === "string") req.end(body);
    else {
      body.on("error", (err) => req.destroy(err));
      body.pipe(req);
    }
  });
}

/** A raw read under way: its size (regular files) and the relay of its bytes (relay.ts). */
export interface RawRead {
  readonly size: number | undefined;
  relayTo(res: ServerResponse, onBytes?: (n: number) => void): Promise<boolean>;
}

/**
 * Reads the file at `path` (absolute) in the unit as `as`, raw (packages/agent/src/fs/raw-read.ts):
 * resolves with the read once the agent has opened the file. An agent from before raw reads answers
 * the upgrade request as an ordinary one: its 200 response is the file. Any other answer is the
 * error (`AgentAnswerError`, e.g. ENOENT).
 */
export async function agentRead(ep: AgentEndpoint, as: FsIdentity, path: string): Promise<RawRead | IncomingMessage> {
  // Through a node (issue #15): the raw read over the node's splice, from the connection's own
  // buffers when it has them (node/remote/ makes its connections to agents RelaySockets), else
  // with the socket's own reads.
  if (ep.connect) {
    const socket = await connectFs(ep, as);
    const own = relayOf(socket);
    return rawRead(socket, path, (socket, head, size) => {
      if (!own) return (out, onBytes) => relayPlain(socket, out, head, size, onBytes);
      own.beginRaw();
      return (out, onBytes) => own.relayTo(out, head, size, onBytes);
    });
  }
  const relay = new RelaySocket(ep.path);
  const socket = await connectFs(ep, as, relay.socket).catch((err) => {
    relay.socket.destroy();
    throw err;
  });
  return rawRead(socket, path, (_socket, head, size) => {
    relay.beginRaw();
    return (out, onBytes) => relay.relayTo(out, head, size, onBytes);
  });
}

/**
 * The raw read's request on `socket` (a connection to the unit's filesystem process): its 101 makes
 * the read with `relay` (for the bytes past the head); a 200 is an older agent's plain answer.
 */
function rawRead(
  socket: Socket,
  path: string,
  relay: (socket: Socket, head: Buffer, size: number | undefined) => RawRead["relayTo"],
): Promise<RawRead | IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({
      createConnection: () => socket,
      method: "GET",
      path: `/fs/read?${new URLSearchParams({ path })}`,
      headers: { connection: "Upgrade", upgrade: RAW_READ },
    });
    req.setTimeout(60_000, () => req.destroy(new Error("the unit's agent did not answer in time")));
    req.on("upgrade", (res, _socket, head) => {
      req.setTimeout(0);
      socket.setTimeout(0);
      const size = res.headers["x-ums-size"];
      const bytes = typeof size === "string" && /^\d+$/.test(size) ? Number(size) : undefined;
      resolve({ size: bytes, relayTo: relay(socket, head, bytes) });
    });
    req.on("response", (res) => {
      req.setTimeout(0);
      if (res.statusCode === 200) resolve(res);
      else readAnswerError(res).then(reject).catch(reject);
    });
    req.on("error", (err) => reject(wrap(err)));
    req.end();
  });
}
