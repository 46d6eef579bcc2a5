import { chmodSync, unlinkSync } from "node:fs";
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from "node:http";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import { serveServices } from "../services/http.js";
import type { Supervisor } from "../services/supervisor.js";

/**
 * The unit's internal API (spec 4.7) on /.unit/api.sock: what processes in the unit use without a
 * token. Services are answered here by the agent's supervisor; checkpoint and keep-awake task
 * requests go on to ums serve over the socket the host keeps for this unit (/.unit/run/host.sock,
 * reachable only from inside this unit); ums knows the unit from the socket. A change of services
 * made here is told to ums (it caches the unit's HTTP target port). Started only when
 * UMS_INTERNAL_API_SOCKET is set (the host sets it for units).
 */
export async function startInternalApi(socketPath: string, hostSocket: string, services?: Supervisor): Promise<Server> {
  const server = createServer((req, res) => {
    route(req, res, hostSocket, services).catch((err) => {
      if (res.headersSent) return res.destroy();
      reply(res, 500, { error: `internal error: ${(err as Error).message}`, code: AgentErrorCode.Internal });
    });
  });
  try {
    unlinkSync(socketPath);
  } catch {}
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  });
  // Any process of the unit may use it, as the spec's clients expect (no token on this socket).
  chmodSync(socketPath, 0o666);
  return server;
}

async function route(req: IncomingMessage, res: ServerResponse, hostSocket: string, services?: Supervisor) {
  const url = new URL(req.url ?? "/", "http://unit");
  const path = url.pathname.replace(/\/+$/, "");
  if (/^\/v1\/(checkpoints?|tasks)(\/|$)/.test(path)) return forward(req, res, hostSocket);
  if (services && (path === "/v1/services" || path.startsWith("/v1/services/"))) {
    const rest = path.slice("/v1/services".length);
    if (await serveServices(services, req, res, rest, url.searchParams, () => notifyHost(hostSocket))) return;
  }
  reply(res, 404, { error: `no internal route ${req.method} ${path}`, code: AgentErrorCode.RouteNotFound });
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** Tells ums that the unit's services changed (best effort: ums also forgets on every stop). */
function notifyHost(hostSocket: string): void {
  const r = request({
    socketPath: hostSocket,
    method: "POST",
    path: "/v1/services/changed",
    headers: { host: "unit" },
  });
  r.on("response", (a) => a.resume());
  r.on("error", () => {});
  r.end();
}

/** Streams the request to ums and its answer back, NDJSON progress included. */
function forward(req: IncomingMessage, res: ServerResponse, hostSocket: string): void {
  const upstream = request(
    { socketPath: hostSocket, method: req.method, path: req.url, headers: { ...req.headers, host: "unit" } },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (err) => {
    if (res.headersSent) return res.destroy(err);
    reply(res, 502, {
      error: `ums is not reachable from this unit: ${err.message}`,
      code: AgentErrorCode.HostUnreachable,
    });
  });
  req.pipe(upstream);
}
