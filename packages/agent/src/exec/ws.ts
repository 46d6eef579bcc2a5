import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { decodeFrame, type PingMessage, type PortMessage, parseClientControl, StreamId } from "@ums/protocol/exec";
import type { RawData, WebSocket } from "ws";
import type { AgentConfig } from "../config.js";
import type { PortWatcher } from "../ports/watch.js";
import { parseSignal } from "../util/signals.js";
import type { SessionUser } from "../util/users.js";
import { WebSocketEndpoint } from "../util/websocket-server.js";
import type { SessionTable } from "./registry.js";
import type { ExecRequest } from "./request.js";
import type { Attachment, Session } from "./session.js";

// Exec websockets (docs/ARCHITECTURE.md section 10): a new session at GET /exec, a re-attach at GET /exec/{id}.
// Every exec websocket also carries keepalive text frames ({"type":"ping"}, at least every 20 s) and port
// notifications (spec 6.5).

const PING = JSON.stringify({ type: "ping" } satisfies PingMessage);

export type ExecTarget =
  | { kind: "new"; request: ExecRequest; user: SessionUser }
  | { kind: "attach"; session: Session };

export class ExecSockets {
  private readonly wss = new WebSocketEndpoint(64 << 20);

  constructor(
    private readonly config: AgentConfig,
    private readonly table: SessionTable,
    private readonly ports: PortWatcher,
  ) {}

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, target: ExecTarget): void {
    this.wss.upgrade(req, socket, head, (ws) => this.connected(ws, target));
  }

  private connected(ws: WebSocket, target: ExecTarget): void {
    const client = attachment(ws);
    ws.on("error", () => {});
    // Subscribe before the process starts, so that ports it opens are reported (not taken as baseline).
    // Reading /proc/net/tcp costs milliseconds: a client that asked for no notifications skips it.
    const wantsPorts = target.kind === "attach" || target.request.ports;
    const unsubscribe = !wantsPorts
      ? () => {}
      : this.ports.subscribe((ev) => {
          const msg: PortMessage = {
            type: ev.type,
            port: ev.port,
            address: this.config.unitUrl ?? `http://localhost:${ev.port}`,
            pid: ev.pid,
          };
          client.sendText(JSON.stringify(msg));
        });
    const ping = setInterval(() => client.sendText(PING), this.config.pingIntervalMs);

    let session: Session;
    if (target.kind === "new") {
      session = this.table.create(target.request, target.user, client);
    } else {
      session = target.session;
      session.attach(client, false);
    }

    ws.on("message", (data: RawData, isBinary: boolean) => {
      const buf = toBuffer(data);
      if (!isBinary) return this.control(session, buf.toString("utf8"));
      if (session.tty) return session.input(buf);
      const frame = decodeFrame(buf);
      if (!frame) return;
      if (frame.stream === StreamId.Stdin) session.input(frame.payload);
      else if (frame.stream === StreamId.StdinEof) session.endInput();
    });
    ws.on("close", () => {
      clearInterval(ping);
      unsubscribe();
      session.detach(client);
    });
  }

  /** Text frames: resize and signal control messages (both modes); on a TTY other text is typed input. */
  private control(session: Session, text: string): void {
    const msg = parseClientControl(text);
    if (msg === null) {
      if (session.tty && !text.startsWith("{")) session.input(Buffer.from(text, "utf8"));
      return;
    }
    if (msg.type === "resize") session.resize(msg.cols, msg.rows);
    else if (msg.type === "stdin_eof") session.endInput();
    else if (msg.type === "signal") {
      const sig = parseSignal(msg.signal);
      if (sig) session.signal(sig.name);
    }
  }

  close(): void {
    this.wss.close();
  }
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

function attachment(ws: WebSocket): Attachment {
  const open = () => ws.readyState === ws.OPEN;
  return {
    sendBinary: (data) => {
      if (open()) ws.send(data, { binary: true });
    },
    sendText: (text) => {
      if (open()) ws.send(text, { binary: false });
    },
    close: (code, reason) => {
      // A paused socket could not read the client's close frame: resume it first.
      ws.resume();
      if (open()) ws.close(code, reason);
    },
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
    pauseInput: () => ws.pause(),
    resumeInput: () => ws.resume(),
  };
}
