import type WebSocket from "ws";
import type { ControlTransport } from "./session.js";

// The client's end of a control websocket, for the session (session.ts): sends with back-pressure
// and a hard bound, pauses reading, and keeps the connection alive with websocket pings (RFC 6455
// §5.5.2), which every client answers without its code seeing them: a text keepalive could land
// where a client reads an op's answer.

/** Above this much unsent to the client, producers wait (`backlogged`). */
export const HIGH_WATER = 1024 * 1024;
/** Producers go on once the unsent bytes are down to this. */
export const LOW_WATER = 256 * 1024;
/**
 * A client this far behind is not reading at all: the connection is closed. Producers stop at
 * HIGH_WATER; only the answers nobody waits on (one file of a read, op.errors) go beyond it.
 */
export const HARD_LIMIT = 40 * 1024 * 1024;

export interface KeepAlive {
  /** How often a ping is sent. */
  readonly intervalMs: number;
  /** A client that answered none of the pings of this long is gone: the connection is closed. */
  readonly deadMs: number;
}

export const KEEPALIVE: KeepAlive = { intervalMs: 20_000, deadMs: 60_000 };

/** The transport of `ws`; its timers stop when the socket closes. */
export function websocketTransport(ws: WebSocket, keepAlive: KeepAlive = KEEPALIVE): ControlTransport {
  let waiters: Array<() => void> = [];
  const wake = () => {
    if (ws.bufferedAmount > LOW_WATER && ws.readyState === ws.OPEN) return;
    const ready = waiters;
    waiters = [];
    for (const w of ready) w();
  };
  let lastPong = Date.now();
  ws.on("pong", () => {
    lastPong = Date.now();
  });
  const timer = setInterval(() => {
    if (Date.now() - lastPong > keepAlive.deadMs) {
      ws.terminate();
      return;
    }
    if (ws.readyState === ws.OPEN) ws.ping();
  }, keepAlive.intervalMs);
  timer.unref();
  ws.once("close", () => {
    clearInterval(timer);
    // Nothing more will drain: producers waiting are let go (their op has ended with the connection).
    const ready = waiters;
    waiters = [];
    for (const w of ready) w();
  });

  return {
    send(data) {
      if (ws.readyState !== ws.OPEN) return;
      if (ws.bufferedAmount > HARD_LIMIT) {
        ws.terminate();
        return;
      }
      ws.send(data, { binary: typeof data !== "string" }, wake);
    },
    backlogged: () => ws.bufferedAmount > HIGH_WATER,
    drained() {
      if (ws.bufferedAmount <= LOW_WATER || ws.readyState !== ws.OPEN) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    pauseInput: () => ws.pause(),
    resumeInput: () => {
      if (ws.readyState === ws.OPEN) ws.resume();
    },
    close(code, reason) {
      if (ws.readyState !== ws.OPEN) return;
      // A paused websocket could not read the client's answer to the close: resumed first.
      ws.resume();
      ws.close(code, reason);
    },
  };
}
