import type { Socket } from "node:net";
import { ErrorCode } from "@ums/protocol";
import { MAX_HEADER_BYTES } from "../../http/limits.js";
import {
  fieldValues,
  HeadError,
  listsToken,
  PARTIAL,
  parseResponseHead,
  type RequestHead,
  type ResponseHead,
} from "../../http/wire/head.js";
import { BadResponse, ResponseBody } from "../../http/wire/response-body.js";
import type { HttpTarget, UnitLease } from "../../node/unit-node.js";
import { ApiError } from "../errors.js";
import { CONNECT_TIMEOUT_MS, RESPONSE_TIMEOUT_MS, UpstreamTimeout, upstreamFailure } from "../proxy/forward.js";
import { forwardedHeaders, responseHeaders } from "../proxy/headers.js";
import { redactQuery } from "../redact.js";
import type { Admitted } from "./fast-admission.js";
import type { FastConnection } from "./fast-path.js";

/** Body bytes held while the unit wakes or its connection opens, before the client is paused. */
const MAX_PENDING_BODY = 64 * 1024;

/**
 * One request of the fast path (fast-path.ts) forwarded to the unit's HTTP target on a raw
 * connection, and its response back, both streamed with backpressure; as `proxyToUnit`
 * (api/proxy/forward.ts) does on Node's HTTP objects: the unit woken and held until the exchange
 * ends, its request headers and response headers rewritten by the same rules (api/proxy/headers.ts),
 * the same errors before the unit answers, a cut-short response never passed on as a whole one.
 */
export class Exchange {
  /** Body bytes the client still has to send (then passed on to the unit). */
  private bodyLeft: number;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private lease: UnitLease | undefined;
  private target: HttpTarget | undefined;
  private up: Socket | undefined;
  private reused = false;
  private retried = false;
  private upBytes = 0;
  private ubuf: Buffer | undefined;
  private response: ResponseHead | undefined;
  /** The response's body, once its head is read. */
  private answerBody: ResponseBody | undefined;
  /** Whether the client got anything of the answer. */
  private answered = false;
  private reusable = false;
  private clientClose: boolean;
  private timer: NodeJS.Timeout | undefined;
  /** Issue #20 part 3: a body that stalls (nothing for the body idle timeout) ends the exchange. */
  private bodyTimer: NodeJS.Timeout | undefined;
  private over = false;
  private waitingDrain = false;
  /** The status of an error answered here (0 before; the unit's answer has its own). */
  private status = 0;
  private readonly wake = new AbortController();
  private readonly startedAt = performance.now();

  constructor(
    private readonly conn: FastConnection,
    private readonly head: RequestHead,
    private readonly admitted: Admitted,
  ) {
    this.bodyLeft = admitted.bodyLength;
    this.clientClose = admitted.close;
  }

  get wantsBody(): boolean {
    return this.bodyLeft > 0;
  }

  /** Starts the exchange with the bytes that came after the head. */
  begin(after: Buffer | undefined): void {
    const idleMs = this.conn.fast.deps.config.connectionLimits.bodyIdleMs;
    if (this.bodyLeft > 0 && idleMs > 0) {
      this.bodyTimer = setTimeout(() => this.bodyStalled(), idleMs);
      this.bodyTimer.unref();
    }
    if (after) {
      const rest = this.body(after);
      if (rest) this.conn.ahead(rest);
    }
    this.run()
      .catch((err: unknown) => this.fail(err))
      .catch((err: unknown) => this.conn.broken(err));
  }

  /** Body bytes from the client; returns what lies past the body's end (the next request's). */
  body(d: Buffer): Buffer | undefined {
    const take = Math.min(this.bodyLeft, d.length);
    this.bodyLeft -= take;
    if (this.bodyTimer) {
      if (this.bodyLeft === 0) this.clearBodyTimer();
      else if (take > 0) this.bodyTimer.refresh();
    }
    if (take > 0 && !this.over) {
      const part = take === d.length ? d : d.subarray(0, take);
      if (this.up && this.pending.length === 0) this.toUnit(part);
      else {
        this.pending.push(part);
        this.pendingBytes += part.length;
        if (this.pendingBytes > MAX_PENDING_BODY) this.conn.socket.pause();
      }
    }
    return take < d.length ? d.subarray(take) : undefined;
  }

  /** No byte of the body for the idle timeout: the client's stall if the wait was not ours (a paused read). */
  private bodyStalled(): void {
    if (this.over || this.bodyLeft === 0) return;
    if (this.conn.socket.isPaused()) {
      this.bodyTimer?.refresh();
      return;
    }
    this.failSafely(
      new ApiError(
        408,
        ErrorCode.RequestTimeout,
        "the request body stalled: nothing arrived for too long; send it without pauses",
      ),
    );
  }

  private clearBodyTimer(): void {
    if (this.bodyTimer) clearTimeout(this.bodyTimer);
    this.bodyTimer = undefined;
  }

  private toUnit(part: Buffer): void {
    const up = this.up as Socket;
    if (!up.write(part)) {
      this.conn.socket.pause();
      up.once("drain", () => {
        if (!this.over) this.conn.socket.resume();
      });
    }
  }

  private async run(): Promise<void> {
    const { unit, org } = this.admitted;
    const deps = this.conn.fast.deps;
    const lease = await deps.node.wake(org, unit, {
      agent: false,
      signal: unit.waitForCapacity ? this.wake.signal : undefined,
    });
    if (this.over) return lease.release();
    this.lease = lease;
    const target = await lease.httpTarget();
    if (this.over) return;
    this.target = target;
    // A fresh boot may reuse the address of a unit that is gone: its kept-alive connections lead nowhere.
    if (lease.booted && !target.connect) this.conn.fast.upstreams.forget(target.host, target.port);
    this.open(this.admitted.bodyLength === 0);
  }

  /** Opens (or takes a kept) connection to the target and sends the request on it. */
  private open(mayReuse: boolean): void {
    const target = this.target as HttpTarget;
    const upstreams = this.conn.fast.upstreams;
    if (target.connect) {
      target.connect((err, socket) => {
        if (err || !socket) return this.failSafely(err ?? new Error("no connection"));
        if (this.over) return socket.destroy();
        this.attach(socket, false);
      });
      return;
    }
    const kept = mayReuse ? upstreams.take(target.host, target.port) : undefined;
    this.attach(kept ?? upstreams.connect(target.host, target.port), kept !== undefined);
  }

  private attach(up: Socket, reused: boolean): void {
    this.up = up;
    this.reused = reused;
    up.on("data", this.onUpData);
    up.on("end", this.onUpEnd);
    up.on("close", this.onUpEnd);
    up.on("error", this.onUpError);
    const port = (this.target as HttpTarget).port;
    const unit = this.admitted.unit;
    if ((up as { connecting?: boolean }).connecting) {
      this.arm(
        CONNECT_TIMEOUT_MS,
        `port ${port} of unit '${unit.name}' did not accept a connection within ${CONNECT_TIMEOUT_MS / 1000}s`,
      );
      up.once("connect", () => {
        if (!this.over && !this.response) this.armResponseTimer();
      });
    } else this.armResponseTimer();

    const conn = this.conn;
    const fields = forwardedHeaders(this.head.rawHeaders, conn.socket.remoteAddress ?? "unknown", {
      ...this.admitted.rules,
      upgrade: false,
    });
    let out = `${this.head.method} ${this.admitted.path} HTTP/1.1\r\n`;
    for (let i = 0; i < fields.length; i += 2) out += `${fields[i]}: ${fields[i + 1]}\r\n`;
    up.cork();
    up.write(`${out}\r\n`, "latin1");
    const pending = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    for (const part of pending) up.write(part);
    up.uncork();
    if (pending.length > 0 && this.bodyLeft > 0) conn.socket.resume();
  }

  private armResponseTimer(): void {
    const port = (this.target as HttpTarget).port;
    this.arm(
      RESPONSE_TIMEOUT_MS,
      `unit '${this.admitted.unit.name}' did not answer on port ${port} within ${RESPONSE_TIMEOUT_MS / 1000}s`,
    );
  }

  private arm(ms: number, message: string): void {
    this.clearTimer();
    this.timer = setTimeout(() => this.failSafely(new UpstreamTimeout(message)), ms);
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private readonly onUpData = (d: Buffer): void => {
    if (this.over) return;
    this.upBytes += d.length;
    try {
      if (!this.answerBody) this.readResponseHead(d);
      else this.responseBody(d);
    } catch (err) {
      this.failSafely(err);
    }
  };

  /** `fail` from a socket's event, where a throw would reach nothing that handles it. */
  private failSafely(err: unknown): void {
    try {
      this.fail(err);
    } catch (bug) {
      this.conn.broken(bug);
    }
  }

  private readonly onUpEnd = (): void => {
    if (this.over) return;
    if (this.answerBody?.kind === "close") {
      this.finish(true);
      return;
    }
    this.fail(
      Object.assign(new Error("the unit closed the connection before its answer ended"), { code: "ECONNRESET" }),
    );
  };

  private readonly onUpError = (err: Error): void => {
    if (!this.over) this.failSafely(err);
  };

  private readResponseHead(d: Buffer): void {
    this.ubuf = this.ubuf ? Buffer.concat([this.ubuf, d]) : d;
    for (;;) {
      const buf = this.ubuf as Buffer;
      let head: ResponseHead | typeof PARTIAL;
      try {
        head = parseResponseHead(buf, MAX_HEADER_BYTES);
      } catch (err) {
        if (err instanceof HeadError) throw new BadResponse(`its response is not valid HTTP/1.1 (${err.message})`);
        throw err;
      }
      if (head === PARTIAL) return;
      const rest = buf.length > head.length ? buf.subarray(head.length) : undefined;
      this.ubuf = undefined;
      if (head.status === 101) throw new BadResponse("it switched protocols without being asked to");
      if (head.status < 200) {
        // An interim answer (103 Early Hints, an unasked 100) goes on; the final one follows.
        this.toClient(this.clientHead(head, ""));
        if (!rest) return;
        this.ubuf = rest;
        continue;
      }
      this.clearTimer();
      this.startBody(head, rest);
      return;
    }
  }

  private startBody(head: ResponseHead, rest: Buffer | undefined): void {
    const body = ResponseBody.of(this.head.method, head);
    this.response = head;
    this.answerBody = body;
    this.reusable =
      head.minorVersion === 1 &&
      body.kind !== "close" &&
      !listsToken(fieldValues(head.rawHeaders, "connection"), "close") &&
      this.target?.connect === undefined;
    // The client's connection ends with this answer when the answer ends by the close, when the
    // client asked, or when the server stops. (One whose request body is still coming when the
    // answer ends is closed then too: `finish`.)
    if (body.kind === "close" || this.conn.fast.stopping) this.clientClose = true;
    let extra = body.kind === "chunked" ? "Transfer-Encoding: chunked\r\n" : "";
    if (this.clientClose) extra += "Connection: close\r\n";
    const socket = this.conn.socket;
    socket.cork();
    this.toClient(this.clientHead(head, extra, body.kind === "chunked"));
    this.answered = true;
    if (body.kind === "none") {
      socket.uncork();
      if (rest) this.reusable = false;
      this.finish(this.clientClose);
      return;
    }
    if (rest) this.responseBody(rest);
    socket.uncork();
  }

  private clientHead(head: ResponseHead, extra: string, dropLength = false): string {
    const fields = responseHeaders(head.rawHeaders);
    let out = `HTTP/1.1 ${head.status} ${head.reason}\r\n`;
    for (let i = 0; i < fields.length; i += 2) {
      // RFC 9112 §6.3: with a transfer coding, a Content-Length is wrong and is not passed on.
      if (dropLength && (fields[i] as string).toLowerCase() === "content-length") continue;
      out += `${fields[i]}: ${fields[i + 1]}\r\n`;
    }
    return `${out}${extra}\r\n`;
  }

  private responseBody(d: Buffer): void {
    const body = this.answerBody as ResponseBody;
    if (body.kind === "none") {
      // Bytes after a response without a body: the connection is not the unit's to reuse.
      this.reusable = false;
      return;
    }
    const take = body.take(d);
    this.toClient(take === d.length ? d : d.subarray(0, take));
    if (take < d.length) this.reusable = false;
    if (body.done) this.finish(this.clientClose);
  }

  private toClient(chunk: string | Buffer): void {
    const socket = this.conn.socket;
    const ok = typeof chunk === "string" ? socket.write(chunk, "latin1") : socket.write(chunk);
    if (!ok && !this.waitingDrain && this.up) {
      this.waitingDrain = true;
      this.up.pause();
      socket.once("drain", () => {
        this.waitingDrain = false;
        this.up?.resume();
      });
    }
  }

  /** The exchange ended as it should (the response whole); `close` ends the client's connection. */
  private finish(close: boolean): void {
    if (this.over) return;
    // A server that stops keeps no connection to a unit: it would hold the process for IDLE_MS.
    const keep = this.reusable && this.bodyLeft === 0 && !this.waitingDrain && !this.conn.fast.stopping;
    const up = this.end(keep);
    if (up) {
      const target = this.target as HttpTarget;
      up.resume();
      this.conn.fast.upstreams.put(target.host, target.port, up);
    }
    this.log(true);
    this.conn.exchangeDone(close || this.bodyLeft > 0);
  }

  /**
   * Ends the exchange: no more timers, the connection to the unit let go (destroyed, or returned
   * for the caller to keep when `keep`), the unit released.
   */
  private end(keep: boolean): Socket | undefined {
    this.over = true;
    this.clearTimer();
    this.clearBodyTimer();
    const up = this.up;
    if (up) {
      this.detach(up);
      if (!keep) up.destroy();
    }
    this.lease?.release();
    return keep ? up : undefined;
  }

  private detach(up: Socket): void {
    up.off("data", this.onUpData);
    up.off("end", this.onUpEnd);
    up.off("close", this.onUpEnd);
    up.off("error", this.onUpError);
  }

  /** Something failed before the exchange ended. */
  private fail(err: unknown): void {
    if (this.over) return;
    const up = this.up;
    // A kept connection the unit had closed already: once more on a fresh one (no body was sent).
    if (
      up &&
      this.reused &&
      !this.retried &&
      this.upBytes === 0 &&
      this.admitted.bodyLength === 0 &&
      !(err instanceof UpstreamTimeout) &&
      !(err instanceof BadResponse)
    ) {
      this.retried = true;
      this.detach(up);
      up.destroy();
      this.up = undefined;
      this.open(false);
      return;
    }
    this.end(false);
    if (this.answered) {
      // Part of the answer left already: the client must not take it for a whole one.
      this.log(false);
      this.conn.socket.destroy();
      return;
    }
    const close = this.clientClose || this.bodyLeft > 0;
    this.status = this.conn.answerError(this.errorFor(err), close);
    this.log(true);
    this.conn.exchangeDone(close);
  }

  private errorFor(err: unknown): unknown {
    const unit = this.admitted.unit;
    const port = this.target?.port ?? 8080;
    if (err instanceof ApiError) return err;
    if (err instanceof BadResponse) {
      return new ApiError(
        502,
        ErrorCode.UnitProxyFailed,
        `unit '${unit.name}' answered on port ${port}, but ${err.message}`,
      );
    }
    // Before a connection to the unit was made, the error is the wake's (a node's typed error, an ApiError).
    if (!this.target) return err;
    return upstreamFailure(err, unit, port);
  }

  /** The client went away: nothing of this exchange is wanted any more. */
  clientGone(): void {
    if (this.over) return;
    this.end(false);
    this.wake.abort();
    this.log(false);
  }

  private log(complete: boolean): void {
    const status = this.response?.status ?? this.status;
    const { method, target } = this.head;
    this.conn.fast.logged(method, redactQuery(target), this.admitted.route, status, this.startedAt, complete);
  }
}
