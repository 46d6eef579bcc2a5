import net, { type Socket } from "node:net";
import tls from "node:tls";

/** Idle kept-alive connections live this long (as Node's keep-alive agents of the proxy keep theirs). */
const IDLE_MS = 4_000;
/** At most this many idle connections to one target. */
const MAX_FREE = 64;

/**
 * Where a raw connection goes: an address (or a name, resolved by the system at connect time) and a
 * port; with `tls`, TLS on top, the certificate checked against `servername` (or the address).
 */
export interface UpstreamTarget {
  readonly host: string;
  readonly port: number;
  readonly tls?: {
    /** The name sent (SNI) and checked against the certificate; none for an address literal. */
    readonly servername?: string;
    /** Certificates trusted instead of Node's bundled roots (tests: the fake provider's own). */
    readonly ca?: readonly string[];
  };
}

interface Idle {
  readonly socket: Socket;
  readonly drop: () => void;
}

const keyOf = (t: UpstreamTarget) =>
  t.tls ? `${t.host}:${t.port}:tls:${t.tls.servername ?? ""}` : `${t.host}:${t.port}`;

/**
 * Kept-alive connections for the fast paths (http/fast/exchange.ts): to units' HTTP targets, and
 * the gateway's to providers, per target, the last one returned taken first. An idle connection
 * that the other end closes, or that receives anything, or that stays idle for IDLE_MS, is dropped.
 * A connection taken from here may still turn out closed: its first request must be one that can be
 * sent again.
 */
export class RawUpstreams {
  private readonly free = new Map<string, Idle[]>();

  /** A kept connection to the target, if there is one. */
  take(target: UpstreamTarget): Socket | undefined {
    const list = this.free.get(keyOf(target));
    while (list && list.length > 0) {
      const idle = list.pop() as Idle;
      idle.drop();
      if (!idle.socket.destroyed) return idle.socket;
    }
    return undefined;
  }

  /**
   * A new connection, TCP_NODELAY (heads and small bodies leave at once). A TLS one verifies the
   * peer's certificate (Node's default, never turned off here): a failed check is the socket's error.
   */
  connect(target: UpstreamTarget): Socket {
    const { host, port } = target;
    if (target.tls) {
      const { servername, ca } = target.tls;
      const socket = tls.connect({ host, port, ...(servername && { servername }), ...(ca && { ca: [...ca] }) });
      socket.setNoDelay(true);
      return socket;
    }
    const socket = net.connect({ host, port });
    socket.setNoDelay(true);
    return socket;
  }

  /** Keeps a connection whose exchange ended cleanly (nothing of the exchange's own listeners left on it). */
  put(target: UpstreamTarget, socket: Socket): void {
    const key = keyOf(target);
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

  /** Closes the idle connections to the target (a fresh boot may reuse an address that led elsewhere). */
  forget(target: UpstreamTarget): void {
    this.closeIdle(keyOf(target));
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
