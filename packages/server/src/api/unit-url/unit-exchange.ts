import { ErrorCode } from "@ums/protocol";
import { ForwardExchange, type ForwardTarget } from "../../http/fast/exchange.js";
import type { FastConnection } from "../../http/fast/listener.js";
import type { RequestHead } from "../../http/wire/head.js";
import { BadResponse } from "../../http/wire/response-body.js";
import type { UnitLease } from "../../node/unit-node.js";
import { ApiError } from "../errors.js";
import { CONNECT_TIMEOUT_MS, RESPONSE_TIMEOUT_MS, upstreamFailure } from "../proxy/forward.js";
import { forwardedHeaders, responseHeaders } from "../proxy/headers.js";
import { redactQuery } from "../redact.js";
import type { Admitted } from "./fast-admission.js";
import type { FastPath } from "./fast-path.js";

/**
 * One request of the unit URL's fast path (fast-path.ts) to the unit's HTTP target, as
 * `proxyToUnit` (api/proxy/forward.ts) does on Node's HTTP objects: the unit woken and held until
 * the exchange ends, its request headers and response headers rewritten by the same rules
 * (api/proxy/headers.ts), the same errors before the unit answers.
 */
export class UnitExchange extends ForwardExchange<Admitted> {
  private lease: UnitLease | undefined;
  private readonly wake = new AbortController();

  constructor(
    conn: FastConnection<Admitted>,
    head: RequestHead,
    admitted: Admitted,
    private readonly fast: FastPath,
  ) {
    super(conn, head, admitted, fast.deps.config.connectionLimits.bodyIdleMs);
  }

  protected async target(): Promise<ForwardTarget> {
    const { unit, org } = this.admitted;
    const lease = await this.fast.deps.node.wake(org, unit, {
      agent: false,
      signal: unit.waitForCapacity ? this.wake.signal : undefined,
    });
    this.lease = lease;
    const target = await lease.httpTarget();
    // A fresh boot may reuse the address of a unit that is gone: its kept-alive connections lead nowhere.
    if (lease.booted && !target.connect) this.fast.upstreams.forget(target);
    return target;
  }

  protected requestHead(): string {
    const fields = forwardedHeaders(this.head.rawHeaders, this.conn.socket.remoteAddress ?? "unknown", {
      ...this.admitted.rules,
      upgrade: false,
    });
    let out = `${this.head.method} ${this.admitted.path} HTTP/1.1\r\n`;
    for (let i = 0; i < fields.length; i += 2) out += `${fields[i]}: ${fields[i + 1]}\r\n`;
    return `${out}\r\n`;
  }

  protected responseFields(rawHeaders: readonly string[]): string[] {
    return responseHeaders(rawHeaders);
  }

  protected timeoutMessage(phase: "connect" | "response"): { ms: number; message: string } {
    const port = this.forwardTarget?.port ?? 8080;
    const unit = this.admitted.unit;
    return phase === "connect"
      ? {
          ms: CONNECT_TIMEOUT_MS,
          message: `port ${port} of unit '${unit.name}' did not accept a connection within ${CONNECT_TIMEOUT_MS / 1000}s`,
        }
      : {
          ms: RESPONSE_TIMEOUT_MS,
          message: `unit '${unit.name}' did not answer on port ${port} within ${RESPONSE_TIMEOUT_MS / 1000}s`,
        };
  }

  protected errorFor(err: unknown): unknown {
    const unit = this.admitted.unit;
    const port = this.forwardTarget?.port ?? 8080;
    if (err instanceof ApiError) return err;
    if (err instanceof BadResponse) {
      return new ApiError(
        502,
        ErrorCode.UnitProxyFailed,
        `unit '${unit.name}' answered on port ${port}, but ${err.message}`,
      );
    }
    // Before a connection to the unit was made, the error is the wake's (a node's typed error, an ApiError).
    if (!this.forwardTarget) return err;
    return upstreamFailure(err, unit, port);
  }

  protected override released(): void {
    const lease = this.lease;
    this.lease = undefined;
    lease?.release();
  }

  protected override abandoned(): void {
    this.wake.abort();
  }

  protected logged(status: number, complete: boolean): void {
    const { method, target } = this.head;
    this.fast.logged(method, redactQuery(target), this.admitted.route, status, this.startedAt, complete);
  }
}
