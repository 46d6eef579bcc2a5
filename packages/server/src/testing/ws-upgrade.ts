import WebSocket from "ws";

/**
 * Asks for a websocket at `url` with the bearer token and closes it at once when it opens: the
 * status the upgrade was answered with (101 when it opened) and the body of a refusal. Rejects
 * only when no answer came (a connection error, or none within `handshakeTimeoutMs`).
 */
export function upgradeAnswer(
  url: string,
  token: string,
  handshakeTimeoutMs?: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${token}` },
      ...(handshakeTimeoutMs !== undefined && { handshakeTimeout: handshakeTimeoutMs }),
    });
    ws.once("open", () => {
      ws.terminate();
      resolve({ status: 101, body: "" });
    });
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on("error", (err) => {
      if (ws.readyState !== ws.OPEN) reject(err);
    });
  });
}
