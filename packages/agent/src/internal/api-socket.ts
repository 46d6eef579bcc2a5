import { chmodSync, unlinkSync } from "node:fs";
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from "node:http";

/**
 * The unit's internal API (spec 4.7) on /.unit/api.sock: what processes in the unit use without a
 * token. Checkpoint requests go on to ums serve over the socket the host keeps for this unit
 * (/.unit/run/host.sock, reachable only from inside this unit); ums knows the unit from the socket.
 * Started only when UMS_INTERNAL_API_SOCKET is set (the host sets it for units).
 */
export async function startInternalApi(socketPath: string, hostSocket: string): Promise<Server> {
  const server = createServer((req, res) => route(req, res, hostSocket));
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

function route(req: IncomingMessage, res: ServerResponse, hostSocket: string): void {
  const path = req.url ?? "/";
  if (/^\/v1\/checkpoints?(\/|\?|$)/.test(path)) {
    forward(req, res, hostSocket);
    return;
  }
  res.writeHead(404, { "content-type": "application/json" });
  res.end(
    JSON.stringify({ error: `no internal route ${req.method} ${path.split("?")[0]}`, code: "UMS_ROUTE_NOT_FOUND" }),
  );
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
    res.writeHead(502, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: `ums is not reachable from this unit: ${err.message}`, code: "UMS_UNAVAILABLE" }));
  });
  req.pipe(upstream);
}
