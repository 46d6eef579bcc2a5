import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";

/**
 * A websocket endpoint of the agent (no server of its own: the agent's HTTP server hands it the
 * upgrades, RFC 6455 section 4.2), made at its first upgrade. A unit's agent starts at every boot and
 * most boots never see a websocket (the host's exec is plain HTTP): the bundle loads ws only then
 * (build.mjs, `lazyWs`), not on the way to the agent's first answer.
 */
export class WebSocketEndpoint {
  private server: WebSocketServer | undefined;

  constructor(private readonly maxPayload: number) {}

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, connected: (ws: WebSocket) => void): void {
    this.server ??= new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: this.maxPayload });
    this.server.handleUpgrade(req, socket, head, connected);
  }

  /** Ends every connection at once, and refuses new ones. */
  close(): void {
    if (!this.server) return;
    for (const ws of this.server.clients) ws.terminate();
    this.server.close();
  }
}
