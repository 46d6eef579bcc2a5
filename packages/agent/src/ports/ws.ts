import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { PingMessage, PortMessage } from "@ums/protocol/exec";
import type { PortsMessage } from "@ums/protocol/tunnel";
import type { WebSocket } from "ws";
import type { AgentConfig } from "../config.js";
import { WebSocketEndpoint } from "../util/websocket-server.js";
import type { PortEvent, PortWatcher } from "./watch.js";

// The port watch (GET /ports/watch, upgrade; the host's `GET /v1/units/{name}/ports/watch`): a websocket
// whose first message lists the ports listening in the unit (`{"type":"ports","ports":[…]}`), followed by
// spec 6.5's `port_opened` / `port_closed` messages as ports open and close, and keepalive text frames
// (`{"type":"ping"}`) as on exec websockets. Nothing the client sends is read.

const PING = JSON.stringify({ type: "ping" } satisfies PingMessage);

export class PortSockets {
  private readonly wss = new WebSocketEndpoint(4096);

  constructor(
    private readonly config: AgentConfig,
    private readonly ports: PortWatcher,
  ) {}

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.wss.upgrade(req, socket, head, (ws) => this.connected(ws));
  }

  /** Spec 6.5's `address`: the unit's URL (as on exec websockets). */
  private address(port: number): string {
    return this.config.unitUrl ?? `http://localhost:${port}`;
  }

  private connected(ws: WebSocket): void {
    ws.on("error", () => {});
    const send = (msg: unknown) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(msg));
    };
    const event = (ev: PortEvent): PortMessage => ({
      type: ev.type,
      port: ev.port,
      address: this.address(ev.port),
      pid: ev.pid,
    });
    // Events before the snapshot wait for it; those it already reflects are dropped then.
    let early: { ev: PortEvent; seq: number }[] | null = [];
    const unsubscribe = this.ports.subscribe((ev, seq) => {
      if (early) early.push({ ev, seq });
      else send(event(ev));
    });
    const ping = setInterval(() => send(PING), this.config.pingIntervalMs);
    ws.on("close", () => {
      clearInterval(ping);
      unsubscribe();
    });
    this.ports.current().then(
      (snap) => {
        const first: PortsMessage = {
          type: "ports",
          ports: snap.ports.map((p) => ({ port: p.port, address: this.address(p.port), pid: p.pid })),
        };
        send(first);
        for (const e of early ?? []) if (e.seq > snap.seq) send(event(e.ev));
        early = null;
      },
      () => ws.close(1011, "the listening ports could not be read"),
    );
  }

  close(): void {
    this.wss.close();
  }
}
