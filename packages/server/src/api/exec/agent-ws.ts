import WebSocket from "ws";

/**
 * Opens a websocket to the unit agent's exec endpoint over its Unix socket (DESIGN.md section 8).
 * It comes back paused: frames that arrived with the handshake (a quick command's whole output)
 * wait until the caller has its listeners on and calls `resume()`.
 */
export function connectAgent(socketPath: string, path: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${socketPath}:${path}`, { perMessageDeflate: false });
    const fail = (err: Error) => {
      ws.removeAllListeners();
      ws.terminate();
      reject(err);
    };
    ws.once("open", () => {
      ws.pause();
      ws.removeListener("error", fail);
      resolve(ws);
    });
    ws.once("error", fail);
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () =>
        fail(Object.assign(new Error(body || `agent answered ${res.statusCode}`), { status: res.statusCode, body })),
      );
    });
  });
}
