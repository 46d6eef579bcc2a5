import { type IncomingMessage, request, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import { type AgentEndpoint, boundAnswer, connectEndpoint } from "./deadline.js";
import { AgentAnswerError, readAnswerError } from "./errors.js";
import { type FdSlot, receiveFd, sendFd, takeFdSlot } from "./fd-read.js";
import { wrap } from "./http.js";
import { RelaySocket, relayOf, relayPlain } from "./relay.js";

/** Who runs a filesystem operation in the unit: the unit user, or root (`asRoot`, spec 4.4). */
export type FsIdentity = "user" | "root";

/** Bytes of a streamed request body (a write) that may wait for the agent's socket: bounded, flat. */
const BODY_AHEAD_BYTES = 1024 * 1024;

/** Upgrade protocol of a raw read (packages/agent/src/fs/raw-read.ts). */
const RAW_READ = "ums-fs-bytes";
/** What the agent answers a raw read with when it sends the file's descriptor instead (issue #16). */
const FD_READ = "ums-fs-fd";

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
 * resolves with the read once the agent has opened the file. One exchange with the agent (the read
 * asked of the agent itself, which hands the connection with it to the process of that identity);
 * with an agent from before that (a unit booted by an older ums), the filesystem connection first,
 * then the read on it. An agent from before raw reads answers the read's upgrade request as an
 * ordinary one: its 200 response is the file. Any other answer is the error (`AgentAnswerError`,
 * e.g. ENOENT).
 */
export async function agentRead(ep: AgentEndpoint, as: FsIdentity, path: string): Promise<RawRead | IncomingMessage> {
  const read = await readInOneExchange(ep, as, path);
  if (read !== OLDER_AGENT) return read;
  // Through a node (issue #15): the raw read over the node's splice, from the connection's own
  // buffers when it has them (node/remote/ makes its connections to agents RelaySockets), else
  // with the socket's own reads.
  if (ep.connect) {
    const socket = await connectFs(ep, as);
    return rawRead(socket, path, (socket, head, size) => rawRelay(socket, relayOf(socket), head, size));
  }
  const relay = new RelaySocket(ep.path);
  const socket = await connectFs(ep, as, relay.socket).catch((err) => {
    relay.socket.destroy();
    throw err;
  });
  return rawRead(socket, path, (socket, head, size) => rawRelay(socket, relay, head, size));
}

/** The agent has no one-step read (readInOneExchange): the read takes two exchanges with it. */
const OLDER_AGENT = Symbol("an agent from before the one-step read");

/**
 * `GET /fs/read?as=&path=` with `Upgrade: ums-fs-bytes` on a new connection to the agent (its Unix
 * socket here, read into a RelaySocket's own buffers; or `ep.connect`'s). The wait for the answer
 * is bounded as the agent's first answers are (the process that answers may have to start first,
 * as for /fs/connect). OLDER_AGENT when the agent has no such route.
 */
function readInOneExchange(
  ep: AgentEndpoint,
  as: FsIdentity,
  path: string,
  fdAllowed = true,
): Promise<RawRead | IncomingMessage | typeof OLDER_AGENT> {
  const own = ep.connect ? undefined : new RelaySocket(ep.path);
  // Issue #16: the agent may answer a large read with the file's descriptor (fd-read.ts).
  const dev = own && fdAllowed ? ep.filesDevice?.() : undefined;
  const slot = dev !== undefined ? takeFdSlot(ep.path) : null;
  return new Promise((resolve, reject) => {
    const req = request({
      createConnection: (_o, done) => own?.socket ?? connectEndpoint(ep, done),
      method: "GET",
      path: `/fs/read?${new URLSearchParams({ as, path, ...(slot && { fd: "1" }) })}`,
      headers: { connection: "Upgrade", upgrade: RAW_READ },
    });
    const deadline = boundAnswer(req, ep);
    req.on("upgrade", (res, socket, head) => {
      deadline.answered();
      socket.setTimeout(0);
      const size = sizeOf(res);
      if (slot && res.headers.upgrade?.toLowerCase() === FD_READ && head.length === 0 && size !== undefined) {
        // Not answered yet: the read is the descriptor's, or (refused) the same read as bytes.
        fdRead(socket as Socket, dev as number, slot, size)
          .catch(() => readInOneExchange(ep, as, path, false))
          .then(resolve)
          .catch(reject);
        return;
      }
      slot?.release();
      resolve({ size, relayTo: rawRelay(socket as Socket, own ?? relayOf(socket), head, size) });
    });
    req.on("response", (res) => {
      slot?.release();
      deadline.answered();
      readAnswerError(res)
        .then((err) =>
          err.status === 404 && err.code === AgentErrorCode.NotFound ? resolve(OLDER_AGENT) : reject(err),
        )
        .catch(reject);
    });
    req.on("error", (err) => {
      slot?.release();
      own?.socket.destroy();
      reject(wrap(err));
    });
    req.end();
  });
}

/**
 * Issue #16: a read the agent answered with `Upgrade: ums-fs-fd` (announcing `size`): the descriptor
 * taken and checked (fd-read.ts), then sent with sendfile(2) by `relayTo`. A file that changed size
 * since the agent's 101 is sent as it was announced: what is beyond is not sent, a shrink cuts the
 * read short (as a raw read's bytes do).
 */
async function fdRead(socket: Socket, dev: number, slot: FdSlot, size: number): Promise<RawRead> {
  const { fd } = await receiveFd(socket, dev, slot);
  let taken = false;
  return {
    size,
    relayTo: (res, onBytes = () => {}) => {
      if (taken) throw new Error("a read is relayed once");
      taken = true;
      return sendFd(fd, size, res, slot, onBytes);
    },
  };
}

/** The size a raw read's 101 announces (`X-Ums-Size`: regular files), if any. */
function sizeOf(res: IncomingMessage): number | undefined {
  const size = res.headers["x-ums-size"];
  return typeof size === "string" && /^\d+$/.test(size) ? Number(size) : undefined;
}

/**
 * The relay of a raw read's bytes past its 101 (`head` first): from `own`'s buffers when the
 * connection is a RelaySocket (its reads raw from here on), else with the socket's own reads.
 */
function rawRelay(
  socket: Socket,
  own: RelaySocket | undefined,
  head: Buffer,
  size: number | undefined,
): RawRead["relayTo"] {
  if (!own) return (out, onBytes) => relayPlain(socket, out, head, size, onBytes);
  own.beginRaw();
  return (out, onBytes) => own.relayTo(out, head, size, onBytes);
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
      const size = sizeOf(res);
      resolve({ size, relayTo: relay(socket, head, size) });
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
