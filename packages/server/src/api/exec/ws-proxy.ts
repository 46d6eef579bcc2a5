import type WebSocket from "ws";

/**
 * Joins a client websocket to the agent's, message for message (binary stays binary, text stays
 * text) so the framing of DESIGN.md section 8 passes through untouched; close codes too.
 */
export function joinWebsockets(client: WebSocket, agent: WebSocket, done: () => void): void {
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    done();
  };
  agent.on("message", (data, isBinary) => {
    if (client.readyState === client.OPEN) client.send(data, { binary: isBinary });
  });
  client.on("message", (data, isBinary) => {
    if (agent.readyState === agent.OPEN) agent.send(data, { binary: isBinary });
  });
  agent.on("close", (code, reason) => {
    if (client.readyState === client.OPEN) client.close(validCode(code), reason);
    finish();
  });
  client.on("close", (code, reason) => {
    if (agent.readyState === agent.OPEN || agent.readyState === agent.CONNECTING) agent.close(validCode(code), reason);
    finish();
  });
  agent.on("error", () => client.terminate());
  client.on("error", () => agent.terminate());
  agent.resume();
}

/** Codes a peer may send (RFC 6455 §7.4); 1005/1006 are only reported, never sent. */
function validCode(code: number): number {
  return code === 1000 ||
    (code >= 3000 && code <= 4999) ||
    (code >= 1001 && code <= 1014 && code !== 1005 && code !== 1006)
    ? code
    : 1000;
}
