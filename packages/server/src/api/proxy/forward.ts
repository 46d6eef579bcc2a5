import http, { type ClientRequest, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type {} from "@fastify/websocket";
import { ErrorCode } from "@ums/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import { dropUnreadBody } from "../../http/early-answer.js";
import { UpstreamTimeout } from "../../http/upstream-timeout.js";
import type { HttpTarget, UnitNode } from "../../node/unit-node.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";
import { once } from "../../util/once.js";
import { ApiError } from "../errors.js";
import { wakeFor } from "../unit-access/lease.js";
import { type RequestHeaderRules, requestHeaders, responseHeaders } from "./headers.js";

/** A unit's port answers a connect at once (refused or accepted): longer means packets are dropped. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** From the request to the unit's response headers (long polls answer within this). */
export const RESPONSE_TIMEOUT_MS = 300_000;
/** Idle keep-alive connections to units live this long (a unit that goes warm keeps none for long). */
const IDLE_SOCKET_MS = 4_000;

/** Connections to units' HTTP targets are kept alive between requests (per unit address and port). */
const agent = new http.Agent({ keepAlive: true, timeout: IDLE_SOCKET_MS, maxFreeSockets: 64, scheduling: "lifo" });

/** Closes the idle kept-alive connections to `host:port`. */
function forgetConnections(host: string, port: number): void {
  for (const [name, sockets] of Object.entries(agent.freeSockets)) {
    if (name.startsWith(`${host}:${port}:`)) for (const s of sockets ?? []) s.destroy();
  }
}

export interface ProxyDeps {
  readonly node: UnitNode;
}

export interface ProxyCall {
  readonly org: OrgRecord;
  readonly unit: UnitRecord;
  /** Path and query as the unit sees them (origin form, starting with `/`). */
  readonly path: string;
  readonly headers: Omit<RequestHeaderRules, "upgrade">;
}

/** One request (or websocket) on its way to the unit's HTTP target at `host:port`. */
interface Exchange {
  readonly req: FastifyRequest;
  readonly reply: FastifyReply;
  readonly call: ProxyCall;
  readonly host: string;
  readonly port: number;
  /** Issue #15: the connection to a unit on another node, made through that node. */
  readonly connect: HttpTarget["connect"];
  /** Ends the hold on the unit (once the exchange is over). */
  readonly release: () => void;
}

/** What a failed connection to the unit's port means for the client. */
export function upstreamFailure(err: unknown, unit: UnitRecord, port: number): ApiError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ECONNREFUSED") {
    return new ApiError(
      502,
      ErrorCode.UnitNoListener,
      `nothing listens on port ${port} in unit '${unit.name}': start an HTTP server on 0.0.0.0:${port} (not 127.0.0.1) inside the unit`,
    );
  }
  if (err instanceof UpstreamTimeout) return new ApiError(504, ErrorCode.UnitTimeout, err.message);
  return new ApiError(
    502,
    ErrorCode.UnitProxyFailed,
    `the connection to port ${port} of unit '${unit.name}' failed: ${code ?? (err instanceof Error ? err.message : String(err))}`,
  );
}

/** @fastify/websocket keeps the bytes read past an upgrade request's head under this symbol. */
function upgradeHead(req: IncomingMessage): Buffer {
  const sym = Object.getOwnPropertySymbols(req).find((s) => s.description === "ws-head");
  const head = sym ? (req as unknown as Record<symbol, unknown>)[sym] : undefined;
  return Buffer.isBuffer(head) ? head : Buffer.alloc(0);
}

/** A request without a body can be sent again when a kept-alive connection turns out closed. */
function hasNoBody(req: IncomingMessage): boolean {
  const len = req.headers["content-length"];
  return req.headers["transfer-encoding"] === undefined && (len === undefined || len === "0");
}

/** Arms the connect and response-header timers of an upstream request. */
function armTimeouts(up: ClientRequest, unit: UnitRecord, port: number): void {
  const response = setTimeout(
    () =>
      up.destroy(
        new UpstreamTimeout(`unit '${unit.name}' did not answer on port ${port} within ${RESPONSE_TIMEOUT_MS / 1000}s`),
      ),
    RESPONSE_TIMEOUT_MS,
  );
  response.unref();
  const clear = () => clearTimeout(response);
  up.once("response", clear);
  up.once("upgrade", clear);
  up.once("close", clear);
  up.once("socket", (socket) => {
    if (!(socket as { connecting?: boolean }).connecting) return;
    const connect = setTimeout(
      () =>
        up.destroy(
          new UpstreamTimeout(
            `port ${port} of unit '${unit.name}' did not accept a connection within ${CONNECT_TIMEOUT_MS / 1000}s`,
          ),
        ),
      CONNECT_TIMEOUT_MS,
    );
    connect.unref();
    socket.once("connect", () => clearTimeout(connect));
    socket.once("close", () => clearTimeout(connect));
  });
}

/**
 * Spec 4.1 (docs/ARCHITECTURE.md section 3): forwards one request (or websocket) to the unit's HTTP target,
 * waking the unit first and holding it awake until the exchange is over (streamed bodies and
 * upgraded connections included). Errors before the unit answers are thrown as `ApiError`s (the
 * caller's `sendError` answers them); once the unit answers, the reply is hijacked and its status,
 * headers and body go to the client as they come.
 */
export async function proxyToUnit(
  deps: ProxyDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  call: ProxyCall,
): Promise<void> {
  const lease = await wakeFor(req, deps.node, call.org, call.unit, { agent: false });
  const release = () => lease.release();
  try {
    const { host, port, connect } = await lease.httpTarget();
    // A fresh boot may reuse the address of a unit that is gone: its kept-alive connections lead nowhere.
    if (lease.booted) forgetConnections(host, port);
    const exchange: Exchange = { req, reply, call, host, port, connect, release };
    if (req.ws) await forwardUpgrade(exchange);
    else await forwardHttp(exchange);
  } catch (err) {
    release();
    throw err;
  }
}

function logExchange(req: FastifyRequest, status: number, start: number, extra: Record<string, unknown> = {}): void {
  req.log.info(
    {
      method: req.method,
      url: req.originalUrl,
      status,
      ms: Math.round((performance.now() - start) * 100) / 100,
      proxied: true,
      ...extra,
    },
    "request",
  );
}

/** How a request reaches the target: kept-alive connections to host:port, or one the node splices (issue #15). */
function route(ex: Pick<Exchange, "host" | "port" | "connect">, keepAlive: boolean): http.RequestOptions {
  const { connect } = ex;
  if (!connect) return { agent: keepAlive ? agent : false, host: ex.host, port: ex.port };
  return {
    createConnection: (_o, done) => {
      connect((err, socket) => done(err, socket as Duplex));
      return undefined as unknown as Duplex;
    },
  };
}

async function forwardHttp({ req, reply, call, host, port, connect, release }: Exchange): Promise<void> {
  const start = performance.now();
  const res = reply.raw;
  const headers = requestHeaders(req.raw, { ...call.headers, upgrade: false });
  const retryable = hasNoBody(req.raw);
  let current: ClientRequest | undefined;
  // The client went away: nothing of this exchange is wanted any more.
  const onClientClose = () => {
    if (!res.writableFinished) current?.destroy();
    release();
  };
  res.once("close", onClientClose);

  const send = (): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const up = http.request({
        ...route({ host, port, connect }, true),
        method: req.method,
        path: call.path,
        headers,
      });
      current = up;
      armTimeouts(up, call.unit, port);
      up.once("response", resolve);
      up.once("error", (err) => {
        req.raw.unpipe(up);
        reject(err);
      });
      if (retryable) up.end();
      else req.raw.pipe(up);
    });

  let upRes: IncomingMessage;
  try {
    try {
      upRes = await send();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // A kept-alive connection the unit had closed already: once more on a fresh one.
      if (!(retryable && current?.reusedSocket && (code === "ECONNRESET" || code === "EPIPE"))) throw err;
      upRes = await send();
    }
  } catch (err) {
    res.off("close", onClientClose);
    if (res.destroyed) {
      // Nobody is left to answer.
      reply.hijack();
      release();
      return;
    }
    // The answer comes before the body was read: the rest of it must not block the connection.
    dropUnreadBody(req.raw, res);
    throw upstreamFailure(err, call.unit, port);
  }

  reply.hijack();
  const up = current as ClientRequest;
  if (res.destroyed) {
    up.destroy();
    return;
  }
  res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, responseHeaders(upRes.rawHeaders));
  // The head leaves with the first bytes of the body when those came with it (one write to the
  // client, not two); a body that is not there yet (a stream, a long poll) does not hold it back.
  let flowed = false;
  upRes.once("data", () => {
    flowed = true;
  });
  setImmediate(() => {
    if (!flowed && !res.writableEnded && !res.destroyed) res.flushHeaders();
  });
  upRes.pipe(res);
  // The unit cut its response short: the client must not take a partial body for a whole one.
  upRes.once("error", () => res.destroy());
  upRes.once("close", () => {
    if (!upRes.complete) res.destroy();
  });
  res.once("close", () => logExchange(req, upRes.statusCode ?? 0, start, { complete: res.writableFinished }));
}

async function forwardUpgrade({ req, reply, call, host, port, connect, release }: Exchange): Promise<void> {
  const start = performance.now();
  const socket = req.raw.socket as Duplex;
  const clientHead = upgradeHead(req.raw);
  const headers = requestHeaders(req.raw, { ...call.headers, upgrade: true });
  const up = http.request({ ...route({ host, port, connect }, false), method: req.method, path: call.path, headers });
  armTimeouts(up, call.unit, port);
  const onClientClose = () => up.destroy();
  socket.once("close", onClientClose);

  const answer = await new Promise<
    { kind: "upgrade"; res: IncomingMessage; socket: Duplex; head: Buffer } | { kind: "response"; res: IncomingMessage }
  >((resolve, reject) => {
    up.once("upgrade", (res, upSocket, head) => resolve({ kind: "upgrade", res, socket: upSocket, head }));
    up.once("response", (res) => resolve({ kind: "response", res }));
    up.once("error", reject);
    up.end();
  }).catch((err) => {
    socket.off("close", onClientClose);
    throw upstreamFailure(err, call.unit, port);
  });
  socket.off("close", onClientClose);
  reply.hijack();

  if (answer.kind === "response") {
    // The unit declined the upgrade: its answer goes back as is, and the connection ends with it.
    const res = reply.raw;
    const upRes = answer.res;
    res.shouldKeepAlive = false;
    res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, responseHeaders(upRes.rawHeaders));
    upRes.pipe(res);
    res.once("close", () => {
      upRes.destroy();
      socket.destroy();
      release();
      logExchange(req, upRes.statusCode ?? 0, start);
    });
    res.once("finish", () => socket.end());
    return;
  }

  const upSocket = answer.socket;
  if (socket.destroyed) {
    upSocket.destroy();
    release();
    return;
  }
  let head = `HTTP/1.1 101 ${answer.res.statusMessage || "Switching Protocols"}\r\n`;
  const pairs = responseHeaders(answer.res.rawHeaders, { upgrade: true });
  for (let i = 0; i < pairs.length; i += 2) head += `${pairs[i]}: ${pairs[i + 1]}\r\n`;
  socket.write(`${head}\r\n`);
  if (answer.head.length > 0) socket.write(answer.head);
  if (clientHead.length > 0) upSocket.write(clientHead);
  for (const s of [socket, upSocket]) {
    (s as { setTimeout?: (ms: number) => void }).setTimeout?.(0);
    (s as { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
  }
  socket.pipe(upSocket);
  upSocket.pipe(socket);
  const close = once(() => {
    socket.destroy();
    upSocket.destroy();
    release();
    logExchange(req, 101, start);
  });
  for (const s of [socket, upSocket]) {
    s.once("close", close);
    s.on("error", close);
  }
}
