import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { ErrorCode } from "@ums/protocol";

/**
 * Issue #20 part 3: what a slow or broken client may hold of the server, set deliberately
 * (docs/SECURITY.md "Limits of a connection"):
 * - the request head must arrive within HEADERS_TIMEOUT_MS (slow headers, "slowloris"), and be at
 *   most MAX_HEADER_BYTES (431 beyond, RFC 6585 §5);
 * - a body may take as long as it needs (exec stdin and file uploads stream for minutes), but one
 *   that stalls, nothing arriving for BODY_IDLE_MS while ums waits for it, ends with 408 (RFC 9110
 *   §15.5.9) and the connection is closed;
 * - an idle keep-alive connection is closed after KEEP_ALIVE_MS; at most MAX_CONNECTIONS at once.
 */
export const HEADERS_TIMEOUT_MS = 20_000;
export const MAX_HEADER_BYTES = 16 * 1024;
export const BODY_IDLE_MS = 60_000;
export const KEEP_ALIVE_MS = 30_000;
export const MAX_CONNECTIONS = 4096;

export interface ConnectionLimits {
  readonly headersTimeoutMs: number;
  readonly bodyIdleMs: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: HEADERS_TIMEOUT_MS,
  bodyIdleMs: BODY_IDLE_MS,
};

/** The Node server options behind those limits (fastify passes `http` options on). */
export function serverOptions(limits: ConnectionLimits) {
  return {
    maxHeaderSize: MAX_HEADER_BYTES,
    keepAliveTimeout: KEEP_ALIVE_MS,
    // The whole request is not bounded in time (bodies stream); a stalled one is, below.
    requestTimeout: 0,
    // Node checks the timeouts of connections every connectionsCheckingInterval (30 s by default).
    connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(limits.headersTimeoutMs / 4))),
  } as const;
}

/** Applies what can only be set on the server itself. */
export function limitServer(server: Server, limits: ConnectionLimits): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.maxConnections = MAX_CONNECTIONS;
}

const STALLED = JSON.stringify({
  error: "the request body stalled: nothing arrived for too long; send it without pauses",
  code: ErrorCode.RequestTimeout,
});

/**
 * Watches a request's body while ums waits for it: when no byte of it arrives for `idleMs` while
 * nothing of it is waiting to be read (so the wait is the client's, not ours), the client gets
 * 408 if nothing was answered yet, and the connection is closed either way.
 */
export function watchBody(req: IncomingMessage, res: ServerResponse, idleMs: number): void {
  const hasBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
  if (!hasBody || idleMs <= 0) return;
  const socket = req.socket;
  let lastBytes = socket.bytesRead;
  let lastChange = Date.now();
  const tick = Math.max(50, Math.min(5_000, Math.floor(idleMs / 4)));
  const timer = setInterval(() => {
    if (req.complete || socket.destroyed) return stop();
    if (socket.bytesRead !== lastBytes || req.readableLength > 0) {
      lastBytes = socket.bytesRead;
      lastChange = Date.now();
      return;
    }
    if (Date.now() - lastChange < idleMs) return;
    stop();
    if (!res.headersSent && socket.writable) {
      res.shouldKeepAlive = false;
      res.writeHead(408, {
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(STALLED),
        connection: "close",
      });
      res.end(STALLED, () => socket.destroy());
      setTimeout(() => socket.destroy(), 1_000).unref();
    } else socket.destroy();
  }, tick);
  timer.unref();
  const stop = () => clearInterval(timer);
  req.once("end", stop);
  req.once("close", stop);
}
