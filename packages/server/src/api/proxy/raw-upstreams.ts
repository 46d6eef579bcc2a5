import net, { type Socket } from "node:net";

/** Idle kept-alive connections to a unit live this long (as forward.ts's agent's do). */
const IDLE_MS = 4_000;
/** At most this many idle connections to one target. */
const MAX_FREE = 64;

interface Idle {
  readonly socket: Socket;
  readonly drop: () => void;
}

/**
 * Kept-alive TCP connections to units' HTTP targets for the unit URL's fast path
 * (api/unit-url/fast-path.ts), per address and port, the last one returned taken first. An idle
 * connection that the unit closes, or that receives anything, or that stays idle for IDLE_MS, is
 * dropped. A connection taken from here may still turn out closed: its first request must be
 * one that can be sent again.
 */
export class RawUpstreams {
  private readonly free = new Map<string, Idle[]>();

  /** A kept connection to host:port, if there is one. */
  take(host: string, port: number): Socket | undefined {
    const list = this.free.get(`${host}:${port}`);
    while (list && list.length > 0) {
      const idle = list.pop() as Idle;
      idle.drop();
      if (!idle.socket.destroyed) return idle.socket;
    }
    return undefined;
  }

  /** A new connection to host:port, TCP_NODELAY (heads and small bodies leave at once). */
  connect(host: string, port: number): Socket {
    const socket = net.connect({ host, port });
    socket.setNoDelay(true);
    return socket;
  }

  /** Keeps a connection whose exchange ended cleanly (nothing of the exchange's own listeners left on it). */
  put(host: string, port: number, socket: Socket): void {
    const key = `${host}:${port}`;
    let list = this.free.get(key);
    if (!list) {
      list = [];
      this.free.set(key, list);
    }
    if (list.length >= MAX_FREE || socket.destroyed) {
      socket.destroy();
      return;
    }
    const gone = () => {
      drop();
      socket.destroy();
      const at = list.indexOf(idle);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0 && this.free.get(key) === list) this.free.delete(key);
    };
    const drop = () => {
      socket.off("close", gone);
      socket.off("error", gone);
      socket.off("data", gone);
      socket.off("end", gone);
      socket.off("timeout", gone);
      socket.setTimeout(0);
    };
    const idle: Idle = { socket, drop };
    socket.on("close", gone);
    socket.on("error", gone);
    socket.on("data", gone);
    socket.on("end", gone);
    socket.on("timeout", gone);
    socket.setTimeout(IDLE_MS);
    list.push(idle);
  }

  /** Closes the idle connections to host:port (a fresh boot may reuse an address that led elsewhere). */
  forget(host: string, port: number): void {
    this.closeIdle(`${host}:${port}`);
  }

  /** Closes every idle connection (the server stops). */
  close(): void {
    for (const key of [...this.free.keys()]) this.closeIdle(key);
  }

  private closeIdle(key: string): void {
    const list = this.free.get(key);
    this.free.delete(key);
    for (const idle of list ?? []) {
      idle.drop();
      idle.socket.destroy();
    }
  }
}
