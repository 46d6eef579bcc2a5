import { type Server, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyBaseLogger } from "fastify";
import type { ServerConfig } from "../../config.js";
import { errorAnswer } from "../../errors/respond.js";
import { KEEP_ALIVE_MS, MAX_HEADER_BYTES } from "../../http/limits.js";
import { HeadError, PARTIAL, parseRequestHead, type RequestHead } from "../../http/wire/head.js";
import { metrics } from "../../metrics/server-metrics.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { Store } from "../../store/store.js";
import { RawUpstreams } from "../proxy/raw-upstreams.js";
import { type Admitted, type ApiProxyAdmission, admit } from "./fast-admission.js";
import { Exchange } from "./fast-exchange.js";

export interface FastPathDeps {
  readonly store: Store;
  readonly config: ServerConfig;
  readonly node: UnitNode;
  readonly cookieKey: Buffer;
  readonly logger: FastifyBaseLogger;
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

/**
 * Issue #16 part 2 (docs/ARCHITECTURE.md section 3, "The unit URL's fast path"): requests for a
 * unit's URL, and reads through `/v1/units/{name}/<path>`, forwarded on the connection's own bytes
 * instead of through Node's HTTP objects and fastify, which cost more than half of each proxied
 * request. Every connection to the API's port starts here. Its requests' heads are read by
 * http/wire/head.ts; one that `admit` takes (a plain, authenticated request for a unit's HTTP
 * target) is forwarded by an `Exchange`; at the first one it
 * does not take, the connection is handed to Node's HTTP server with the bytes read so far, and
 * stays there: the API, logins, errors and websockets are answered as before.
 */
export class FastPath {
  readonly upstreams = new RawUpstreams();
  private readonly open = new Set<FastConnection>();
  /** The server stops: no connection starts here any more, none is kept for another request. */
  stopping = false;
  /** Reads through `/v1/units/{name}/<path>` too, once the API's routes exist (set by app.ts). */
  api: ApiProxyAdmission | undefined;

  constructor(
    readonly deps: FastPathDeps,
    /** Node's own connection listener: the connection's requests are its from then on. */
    readonly handOver: (socket: Socket) => void,
  ) {}

  /** Takes the server's connections; undefined when Node's listener is not where it is expected. */
  static install(server: Server, deps: FastPathDeps): FastPath | undefined {
    const listeners = server.listeners("connection") as ((socket: Socket) => void)[];
    if (listeners.length !== 1) return undefined;
    const node = listeners[0] as (socket: Socket) => void;
    const fast = new FastPath(deps, (socket) => node.call(server, socket));
    server.removeListener("connection", node);
    server.on("connection", (socket: Socket) => fast.accept(socket));
    // Node's close() closes its idle connections through closeIdleConnections(); ours go with them.
    const closeIdle = server.closeIdleConnections.bind(server);
    server.closeIdleConnections = () => {
      fast.stop(false);
      closeIdle();
    };
    const closeAll = server.closeAllConnections.bind(server);
    server.closeAllConnections = () => {
      fast.stop(true);
      closeAll();
    };
    return fast;
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

  forget(conn: FastConnection): void {
    this.open.delete(conn);
  }

  /** The server stops: idle connections close, busy ones after their exchange (all: at once). */
  stop(all: boolean): void {
    this.stopping = true;
    this.upstreams.close();
    for (const conn of [...this.open]) conn.stop(all);
  }

  /** One line per forwarded request, as the API's own (`proxied`: forwarded to a unit). */
  logged(method: string, url: string, route: string, status: number, startedAt: number, complete: boolean): void {
    const seconds = (performance.now() - startedAt) / 1000;
    if (this.deps.config.metrics) metrics.request(method, route, status, seconds);
    this.deps.logger.info(
      { method, url, status, ms: Math.round(seconds * 100_000) / 100, proxied: true, fast: true, complete },
      "request",
    );
  }
}

/** One client connection while its requests are the fast path's. */
export class FastConnection {
  private mode = Mode.Head;
  /** Bytes read and not yet used: a head in the making, or requests sent ahead of an answer. */
  private buf: Buffer | undefined;
  private timer: NodeJS.Timeout | undefined;
  private exchange: Exchange | undefined;
  private stopAfter = false;

  constructor(
    readonly fast: FastPath,
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
    this.fast.deps.logger.error({ err }, "unit URL fast path: internal error; the connection is closed");
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
        // The body goes to the unit; what follows it is the next request's.
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
    const ms = idle ? KEEP_ALIVE_MS : this.fast.deps.config.connectionLimits.headersTimeoutMs;
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
    admit(head, this.fast.deps, this.fast.api)
      .then(
        (admitted) => {
          if (this.mode !== Mode.Deciding) return;
          if (!admitted) {
            this.handOverNow();
            return;
          }
          this.forward(head, admitted);
        },
        (err: unknown) => {
          // The store failed: the API's path answers it as any other request's error.
          this.fast.deps.logger.warn({ err }, "unit URL fast path: admission failed; the API answers");
          if (this.mode === Mode.Deciding) this.handOverNow();
        },
      )
      .catch((err: unknown) => this.broken(err));
  }

  private forward(head: RequestHead, admitted: Admitted): void {
    this.mode = Mode.Exchange;
    const buf = this.buf as Buffer;
    const after = buf.length > head.length ? buf.subarray(head.length) : undefined;
    this.buf = undefined;
    const exchange = new Exchange(this, head, admitted);
    this.exchange = exchange;
    exchange.begin(after);
    // The client's bytes flow again: the body (to the unit) and what is sent ahead.
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

  /** Writes an error answer for a request that reached no unit (spec section 7); returns its status. */
  answerError(err: unknown, close: boolean): number {
    const answer = errorAnswer(err);
    if (answer.internal) this.fast.deps.logger.error({ err }, "internal error");
    const body = JSON.stringify(answer.body);
    let head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ""}\r\n`;
    for (const [k, v] of Object.entries(answer.headers)) head += `${k}: ${v}\r\n`;
    head += `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
    if (close) head += "Connection: close\r\n";
    this.socket.write(`${head}\r\n${body}`);
    return answer.status;
  }
}
