import type { Socket } from "node:net";
import { ErrorCode } from "@ums/protocol";
import { ApiError } from "../../errors/api-error.js";
import { DRAIN_MAX_BYTES, DRAIN_MAX_MS } from "../early-answer.js";
import { MAX_HEADER_BYTES } from "../limits.js";
import { UpstreamTimeout } from "../upstream-timeout.js";
import {
  fieldValues,
  HeadError,
  listsToken,
  PARTIAL,
  parseResponseHead,
  type RequestHead,
  type ResponseHead,
} from "../wire/head.js";
import { BadResponse, ResponseBody } from "../wire/response-body.js";
import type { FastConnection, FastExchange } from "./listener.js";
import type { UpstreamTarget } from "./upstreams.js";

/** What every forwarded request is, as its listener's `admit` found it. */
export interface ForwardRequest {
  /** Bytes of body that follow the head (Content-Length; 0 without one). */
  readonly bodyLength: number;
  /** The client asked to close the connection after this exchange. */
  readonly close: boolean;
}

/** Where an exchange's request goes: a raw target, or (`connect`) a connection made for it. */
export interface ForwardTarget extends UpstreamTarget {
  /** A connection made for this exchange (issue #15: the node splices it); never kept after it. */
  readonly connect?: (done: (err: Error | null, socket?: Socket) => void) => void;
}

/** Body bytes held while the target is found or its connection opens, before the client is paused. */
const MAX_PENDING_BODY = 64 * 1024;

/**
 * One request of a fast listener (listener.ts) forwarded to its target on a raw connection, and
 * the response back, both streamed with backpressure, a kept-alive connection reused when the
 * answer allows it, a cut-short response never passed on as a whole one. What is particular to a
 * site is its subclass's: where the request goes (`target`), the head it is sent with
 * (`requestHead`), the response's fields for the client (`responseFields`), the errors (`errorFor`,
 * `timeoutMessage`) and the log line (`logged`).
 */
export abstract class ForwardExchange<A extends ForwardRequest> implements FastExchange {
  /** Body bytes the client still has to send (then passed on to the target). */
  private bodyLeft: number;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Where the request went, once known. */
  protected forwardTarget: ForwardTarget | undefined;
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
  /** The body stalled (408): the connection ends with the answer. */
  private stalled = false;
  /** Set while the rest of a body the answer came before is dropped. */
  private drainTimer: NodeJS.Timeout | undefined;
  private waitingDrain = false;
  /** The status of an error answered here (0 before; the target's answer has its own). */
  private status = 0;
  protected readonly startedAt = performance.now();

  constructor(
    protected readonly conn: FastConnection<A>,
    protected readonly head: RequestHead,
    protected readonly admitted: A,
    /** Issue #20 part 3: how long a request body may pause (0: forever). */
    private readonly bodyIdleMs: number,
  ) {
    this.bodyLeft = admitted.bodyLength;
    this.clientClose = admitted.close;
  }

  /** Where the request goes (a unit woken, a provider's address checked); throws the error to answer. */
  protected abstract target(): Promise<ForwardTarget>;

  /** The head the request is sent with, its final empty line included. */
  protected abstract requestHead(): string;

  /** The response's fields as the client gets them (`[name, value, …]`), framing fields aside. */
  protected abstract responseFields(rawHeaders: readonly string[]): string[];

  /** The error the client is answered for `err` (before any of the answer left). */
  protected abstract errorFor(err: unknown): unknown;

  /** The message of a timeout: of the connect, or of the wait for the response's head. */
  protected abstract timeoutMessage(phase: "connect" | "response"): { ms: number; message: string };

  /** One log line (and metric) per exchange, whatever its end. */
  protected abstract logged(status: number, complete: boolean): void;

  /** Whether the target's answer (its head) came back. */
  protected get responded(): boolean {
    return this.response !== undefined;
  }

  /** The exchange is over (its target no longer held); once. */
  protected released(): void {}

  get wantsBody(): boolean {
    return this.bodyLeft > 0;
  }

  /** Starts the exchange with the bytes that came after the head. */
  begin(after: Buffer | undefined): void {
    const idleMs = this.bodyIdleMs;
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
    if (this.drainTimer && this.bodyLeft === 0) {
      // The dropped body ended: what follows it is the next request, read once this one is done.
      clearTimeout(this.drainTimer);
      this.drainTimer = undefined;
      if (take < d.length) this.conn.ahead(d.subarray(take));
      this.conn.exchangeDone(false);
      return undefined;
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
    this.stalled = true;
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
    const target = await this.target();
    if (this.over) {
      // It ended while the target was being found (the client went): whatever that took is let go.
      this.released();
      return;
    }
    this.forwardTarget = target;
    this.open(this.admitted.bodyLength === 0);
  }

  /** Opens (or takes a kept) connection to the target and sends the request on it. */
  private open(mayReuse: boolean): void {
    const target = this.forwardTarget as ForwardTarget;
    const upstreams = this.conn.fast.upstreams;
    if (target.connect) {
      target.connect((err, socket) => {
        if (err || !socket) return this.failSafely(err ?? new Error("no connection"));
        if (this.over) return socket.destroy();
        this.attach(socket, false);
      });
      return;
    }
    const kept = mayReuse ? upstreams.take(target) : undefined;
    this.attach(kept ?? upstreams.connect(target), kept !== undefined);
  }

  private attach(up: Socket, reused: boolean): void {
    this.up = up;
    this.reused = reused;
    up.on("data", this.onUpData);
    up.on("end", this.onUpEnd);
    up.on("close", this.onUpEnd);
    up.on("error", this.onUpError);
    if ((up as { connecting?: boolean }).connecting) {
      this.arm("connect");
      // A TLS connection counts as made once its handshake is done and the certificate checked.
      up.once(this.forwardTarget?.tls && !this.forwardTarget.connect ? "secureConnect" : "connect", () => {
        if (!this.over && !this.response) this.arm("response");
      });
    } else this.arm("response");

    const conn = this.conn;
    up.cork();
    up.write(this.requestHead(), "latin1");
    const pending = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    for (const part of pending) up.write(part);
    up.uncork();
    if (pending.length > 0 && this.bodyLeft > 0) conn.socket.resume();
  }

  private arm(phase: "connect" | "response"): void {
    const { ms, message } = this.timeoutMessage(phase);
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
    this.fail(Object.assign(new Error("the connection closed before the answer ended"), { code: "ECONNRESET" }));
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
      this.forwardTarget?.connect === undefined;
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
    const fields = this.responseFields(head.rawHeaders);
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
      // Bytes after a response without a body: the connection is not one to reuse.
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
    // A server that stops keeps no connection: it would hold the process for IDLE_MS.
    const keep = this.reusable && this.bodyLeft === 0 && !this.waitingDrain && !this.conn.fast.stopping;
    const up = this.end(keep);
    if (up) {
      up.resume();
      this.conn.fast.upstreams.put(this.forwardTarget as ForwardTarget, up);
    }
    this.log(true);
    this.conn.exchangeDone(close || this.bodyLeft > 0);
  }

  /**
   * Ends the exchange: no more timers, the connection to the target let go (destroyed, or returned
   * for the caller to keep when `keep`), the target released.
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
    this.released();
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
    // A kept connection the other end had closed already: once more on a fresh one (no body was sent).
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
    // Issue #19 finding 10 (http/early-answer.ts): the rest of a body the answer came before is
    // read and dropped, so that the connection carries the next request; unless it is too large,
    // or it is the body that stalled.
    const drain = !this.clientClose && !this.stalled && this.bodyLeft > 0 && this.bodyLeft <= DRAIN_MAX_BYTES;
    const close = this.clientClose || (this.bodyLeft > 0 && !drain);
    this.status = this.conn.answerError(this.errorFor(err), close);
    this.log(true);
    if (!drain) {
      this.conn.exchangeDone(close);
      return;
    }
    this.drainTimer = setTimeout(() => this.conn.socket.destroy(), DRAIN_MAX_MS);
    this.drainTimer.unref();
    // Bytes held for the target are dropped; a client paused for them reads on.
    this.pending = [];
    this.pendingBytes = 0;
    this.conn.socket.resume();
  }

  /** The client went away: nothing of this exchange is wanted any more. */
  clientGone(): void {
    if (this.drainTimer) clearTimeout(this.drainTimer);
    this.drainTimer = undefined;
    if (this.over) return;
    this.end(false);
    this.abandoned();
    this.log(false);
  }

  /** The client went away before the end (a wait for the target may stop). */
  protected abandoned(): void {}

  private log(complete: boolean): void {
    this.logged(this.response?.status ?? this.status, complete);
  }
}
