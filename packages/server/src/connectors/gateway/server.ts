import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { ErrorCode } from "@ums/protocol";
import { ApiError } from "../../errors/api-error.js";
import { writeError } from "../../errors/respond.js";
import { metrics } from "../../metrics/server-metrics.js";
import { type GatewayDeps, prepareCall, providerFailed } from "./call.js";
import { FastGateway } from "./fast.js";
import { forward } from "./forward.js";
import { pinnedLookup } from "./pinned-target.js";

export type { GatewayCache, GatewayDeps } from "./call.js";

/**
 * The connector gateway (issue #7) on Node's HTTP objects: the calls its fast path (fast.ts) hands
 * over (a chunked body, `Expect`, a head its strict reader refuses), and every call when the fast
 * path is not installed. Decided by `prepareCall` (call.ts), as the fast path's.
 */
export function gatewayHandler(d: GatewayDeps) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let call: Awaited<ReturnType<typeof prepareCall>>;
    try {
      call = await prepareCall(d, {
        method: req.method ?? "GET",
        target: req.url ?? "/",
        remoteAddress: req.socket.remoteAddress,
        localAddress: req.socket.localAddress,
        connection: req.headers.connection,
      });
    } catch (err) {
      if (err instanceof ApiError) {
        writeError(res, err);
        return;
      }
      throw err;
    }
    const headers: Record<string, string | string[]> = {};
    for (const k in req.headers) {
      const v = req.headers[k];
      if (v !== undefined && call.keeps(k)) headers[k] = v;
    }
    Object.assign(headers, call.fields);
    const { url, pinned, log } = call;
    forward(req, res, {
      url,
      headers,
      ...(pinned && { lookup: pinnedLookup(pinned) }),
      ...(d.ca && { ca: d.ca }),
      done: (status) => {
        if (status instanceof Error) {
          writeError(res, providerFailed(call));
          d.log.warn({ ...log, err: status.message }, "gateway upstream failed");
          return;
        }
        d.log.info({ ...log, status, ms: Math.round((performance.now() - call.startedAt) * 100) / 100 }, "gateway");
      },
    });
  };
}

/**
 * The gateway's own listener (0.0.0.0:<gatewayPort>); the firewall lets units reach only this port.
 * Its connections start on the fast path (fast.ts), which hands this server what it does not take.
 */
export function createGatewayServer(d: GatewayDeps): Server {
  const handle = gatewayHandler(d);
  const server = createServer((req, res) => {
    // Every call counts once, by status class; one whose answer never completed as "error".
    res.once("close", () => metrics.gatewayCall(res.writableFinished ? res.statusCode : 0));
    handle(req, res).catch((err) => {
      d.log.error({ err: err instanceof Error ? err.message : String(err) }, "gateway internal error");
      if (!res.headersSent)
        writeError(res, new ApiError(500, ErrorCode.Internal, "internal error; see the server log"));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 30_000;
  if (!new FastGateway(d).installOn(server)) {
    d.log.warn("gateway fast path not installed: the server's connection listener is not Node's alone");
  }
  return server;
}
