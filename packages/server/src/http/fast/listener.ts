import { type Server, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { errorAnswer } from "../../errors/respond.js";
import { KEEP_ALIVE_MS, MAX_HEADER_BYTES } from "../limits.js";
import { HeadError, PARTIAL, parseRequestHead, type RequestHead } from "../wire/head.js";
import { RawUpstreams } from "./upstreams.js";

/** What a fast listener logs through (pino's and fastify's loggers are both this). */
export interface FastLogger {
  error(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/** What the connection is doing: reading a head, deciding on one, forwarding, or no longer ours. */
enum Mode {
  Head,
  Deciding,
  Exchange,
  HandedOver,
  Closed,
}

/** Bytes read ahead of the exchange in flight (pipelined requests) before the client is paused. */
const MAX_AHEAD_BYTES = 2 * MAX_HEADER_BYTES;

/** One request being forwarded on a fast connection (http/fast/exchange.ts). */
export interface FastExchange {
  /** Whether body bytes of the request are still to come from the client. */
  readonly wantsBody: boolean;
  /** Starts with the bytes that came after the head. */
  begin(after: Buffer | undefined): void;
  /** Body bytes from the client; returns what lies past the body's end (the next request's). */
  body(d: Buffer): Buffer | undefined;
  /** The client went away: nothing of this exchange is wanted any more. */
  clientGone(): void;
}

/**
 * A listener whose connections' requests are read as raw bytes (http/wire/head.ts) and forwarded
 * without Node's HTTP objects (issue #16 parts 2 and 3; docs/ARCHITECTURE.md section 3, "The fast
 * paths"). A request `admit` takes is forwarded by the exchange `exchange` makes; at the first one it
 * does not take, the connection is handed to Node's HTTP server with the bytes read so far and
 * stays there: everything else is answered as before. The unit URL (api/unit-url/fast-path.ts) and
 * the connector gateway (connectors/gateway/fast.ts) are its two sites.
 */
export abstract class FastListener<A> {
  readonly upstreams = new RawUpstreams();
  private readonly open = new Set<FastConnection<A>>();
  /** The server stops: no connection starts here any more, none is kept for another request. */
  stopping = false;
  /** Node's own connection listener: the connection's requests are its from then on. */
  handOver: (socket: Socket) => void = (socket) => socket.destroy();

  constructor(
    /** For log lines: what this listener is ("unit URL fast path"). */
    readonly name: string,
    readonly logger: FastLogger,
    /** RFC 9112 §9.5 and http/limits.ts: how long a head may take from its first byte. */
    readonly headersTimeoutMs: number,
  ) {}

  /** The request's exchange if this listener forwards it; undefined: Node's server answers it. */
  abstract admit(head: RequestHead, socket: Socket): Promise<A | undefined>;

  /** The exchange that forwards an admitted request. */
  abstract exchange(conn: FastConnection<A>, head: RequestHead, admitted: A): FastExchange;

  /**
   * Takes `server`'s connections; false when Node's listener is not where it is expected (the
   * server then answers every request itself, as before).
   */
  installOn(server: Server): boolean {
    const listeners = server.listeners("connection") as ((socket: Socket) => void)[];
    if (listeners.length !== 1) return false;
    const node = listeners[0] as (socket: Socket) => void;
    this.handOver = (socket) => node.call(server, socket);
    server.removeListener("connection", node);
    server.on("connection", (socket: Socket) => this.accept(socket));
    // Node's close() closes its idle connections through closeIdleConnections(); ours go with them.
    const closeIdle = server.closeIdleConnections.bind(server);
    server.closeIdleConnections = () => {
      this.stop(false);
      closeIdle();
    };
    const closeAll = server.closeAllConnections.bind(server);
    server.closeAllConnections = () => {
      this.stop(true);
      closeAll();
    };
    return true;
  }

  accept(socket: Socket): void {
    if (this.stopping) {
      this.handOver(socket);
      return;
    }
    const conn = new FastConnection(this, socket);
    this.open.add(conn);
    conn.start();
  }

  forget(conn: FastConnection<A>): void {
    this.open.delete(conn);
  }

  /** The server stops: idle connections close, busy ones after their exchange (all: at once). */
  stop(all: boolean): void {
    this.stopping = true;
    this.upstreams.close();
    for (const conn of [...this.open]) conn.stop(all);
  }
}

/** One client connection while its requests are a fast listener's. */
export class FastConnection<A> {
  private mode = Mode.Head;
  /** Bytes read and not yet used: a head in the making, or requests sent ahead of an answer. */
  private buf: Buffer | undefined;
  private timer: NodeJS.Timeout | undefined;
  private exchange: FastExchange | undefined;
  private stopAfter = false;

  constructor(
    readonly fast: FastListener<A>,
    readonly socket: Socket,
  ) {}

  start(): void {
    const s = this.socket;
    s.setNoDelay(true);
    s.on("data", this.onData);
    s.on("error", this.onGone);
    s.on("close", this.onGone);
    s.on("end", this.onEnd);
    this.armTimer(false);
  }

  private readonly onData = (d: Buffer): void => {
    try {
      this.take(d);
    } catch (err) {
      this.broken(err);
    }
  };

  /**
   * A bug of the fast path's, thrown where nothing else would catch it (a socket's event, a
   * promise's continuation): the server goes on, this connection ends, the error is logged.
   */
  broken(err: unknown): void {
    this.fast.logger.error({ err }, `${this.fast.name}: internal error; the connection is closed`);
    this.onGone();
  }

  private take(d: Buffer): void {
    switch (this.mode) {
      case Mode.Head: {
        const first = !this.buf || this.buf.length === 0;
        this.append(d);
        // The first bytes of a head: from now on it has the headers timeout to end.
        if (first) this.armTimer(false);
        this.readHead();
        return;
      }
      case Mode.Exchange:
        // The body goes on; what follows it is the next request's.
        if (this.exchange?.wantsBody) {
          const rest = this.exchange.body(d);
          if (rest) this.ahead(rest);
        } else this.ahead(d);
        return;
      case Mode.Deciding:
        this.ahead(d);
        return;
      default:
        return;
    }
  }

  private readonly onEnd = (): void => {
    // A client that ends its side after its requests still gets their answers; an idle one is
    // done, and one that ends inside a body will never finish it.
    if (this.mode === Mode.Head && !this.buf) this.close();
    else if (this.exchange?.wantsBody) this.onGone();
    else this.stopAfter = true;
  };

  private readonly onGone = (): void => {
    if (this.mode === Mode.HandedOver || this.mode === Mode.Closed) return;
    this.mode = Mode.Closed;
    this.clearTimer();
    this.exchange?.clientGone();
    this.exchange = undefined;
    this.fast.forget(this);
    this.socket.destroy();
  };

  private append(d: Buffer): void {
    this.buf = this.buf ? Buffer.concat([this.buf, d]) : d;
  }

  /** Bytes of requests after the one in flight: kept for later, the client paused once they pile up. */
  ahead(d: Buffer): void {
    this.append(d);
    if ((this.buf as Buffer).length > MAX_AHEAD_BYTES) this.socket.pause();
  }

  /**
   * RFC 9112 §9.5 keep-alive: an idle connection waits KEEP_ALIVE_MS for its next request; a head
   * must end within the headers timeout from its first byte (slow heads, http/limits.ts), and a new
   * connection's first one from the connection's start, as Node's server has it.
   */
  private armTimer(idle: boolean): void {
    this.clearTimer();
    const ms = idle ? KEEP_ALIVE_MS : this.fast.headersTimeoutMs;
    this.timer = setTimeout(() => (idle ? this.close() : this.headTimedOut()), ms);
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private headTimedOut(): void {
    if (this.mode !== Mode.Head) return;
    this.mode = Mode.Closed;
    this.socket.end("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    this.socket.destroySoon();
    this.fast.forget(this);
  }

  private readHead(): void {
    const buf = this.buf;
    if (!buf || buf.length === 0) return;
    let head: RequestHead | typeof PARTIAL;
    try {
      head = parseRequestHead(buf, MAX_HEADER_BYTES);
    } catch (err) {
      if (err instanceof HeadError) {
        this.handOverNow();
        return;
      }
      throw err;
    }
    if (head !== PARTIAL) this.decide(head);
  }

  private decide(head: RequestHead): void {
    this.mode = Mode.Deciding;
    this.clearTimer();
    this.socket.pause();
    if (this.fast.stopping) {
      this.handOverNow();
      return;
    }
    this.fast
      .admit(head, this.socket)
      .then(
        (admitted) => {
          if (this.mode !== Mode.Deciding) return;
          if (admitted === undefined) {
            this.handOverNow();
            return;
          }
          this.forward(head, admitted);
        },
        (err: unknown) => {
          // The store failed: Node's server answers it as any other request's error.
          this.fast.logger.warn({ err }, `${this.fast.name}: admission failed; the request goes the usual way`);
          if (this.mode === Mode.Deciding) this.handOverNow();
        },
      )
      .catch((err: unknown) => this.broken(err));
  }

  private forward(head: RequestHead, admitted: A): void {
    this.mode = Mode.Exchange;
    const buf = this.buf as Buffer;
    const after = buf.length > head.length ? buf.subarray(head.length) : undefined;
    this.buf = undefined;
    const exchange = this.fast.exchange(this, head, admitted);
    this.exchange = exchange;
    exchange.begin(after);
    // The client's bytes flow again: the body (on to the target) and what is sent ahead.
    this.socket.resume();
  }

  /** From the exchange: it is over; `close` when the connection cannot carry another request. */
  exchangeDone(close: boolean): void {
    this.exchange = undefined;
    if (this.mode !== Mode.Exchange) return;
    if (close || this.stopAfter || this.fast.stopping) {
      this.close();
      return;
    }
    this.mode = Mode.Head;
    const waiting = this.buf !== undefined && this.buf.length > 0;
    this.armTimer(!waiting);
    this.socket.resume();
    if (waiting) this.readHead();
  }

  /** Gives the connection to Node's HTTP server with every byte read of it that was not used. */
  private handOverNow(): void {
    if (this.mode === Mode.HandedOver || this.mode === Mode.Closed) return;
    this.mode = Mode.HandedOver;
    this.clearTimer();
    this.fast.forget(this);
    const s = this.socket;
    s.off("data", this.onData);
    s.off("error", this.onGone);
    s.off("close", this.onGone);
    s.off("end", this.onEnd);
    s.pause();
    // Everything read of the connection and not used, in order: ours, then what the socket holds.
    for (let more = s.read() as Buffer | null; more !== null; more = s.read() as Buffer | null) this.append(more);
    const pending = this.buf;
    this.buf = undefined;
    if (s.destroyed) return;
    // Node's server reads a socket it takes through its own parser, and holds a request body back
    // by the socket's 'pause' and 'resume' events (they stop and start the reads). It takes the
    // socket paused, and gets the bytes once the 'resume' of the resume() below has reached it: a
    // 'resume' still on its way when its parser had paused the socket for a body would start the
    // reads again behind that pause, and the body would pile up in memory (api/fs/transfer.test.ts
    // saw 500 MiB).
    this.fast.handOver(s);
    s.once("resume", () => {
      if (pending && pending.length > 0 && !s.destroyed) s.unshift(pending);
    });
    s.resume();
  }

  /** Ends the connection once what was written has left. */
  close(): void {
    if (this.mode === Mode.Closed || this.mode === Mode.HandedOver) return;
    this.mode = Mode.Closed;
    this.clearTimer();
    this.fast.forget(this);
    this.socket.end();
    this.socket.destroySoon();
    setTimeout(() => this.socket.destroy(), 2_000).unref();
  }

  /** The server stops: an idle connection closes now, a busy one after its exchange (or now, `all`). */
  stop(all: boolean): void {
    if (all) {
      this.onGone();
      return;
    }
    if (this.mode === Mode.Head && !this.buf) this.close();
    else this.stopAfter = true;
  }

  /** Writes an error answer for a request that reached no target (spec section 7); returns its status. */
  answerError(err: unknown, close: boolean): number {
    const answer = errorAnswer(err);
    if (answer.internal) this.fast.logger.error({ err }, "internal error");
    const body = JSON.stringify(answer.body);
    let head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ""}\r\n`;
    for (const [k, v] of Object.entries(answer.headers)) head += `${k}: ${v}\r\n`;
    head += `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
    if (close) head += "Connection: close\r\n";
    this.socket.write(`${head}\r\n${body}`);
    return answer.status;
  }
}
