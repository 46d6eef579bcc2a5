import { isIP, type Socket } from "node:net";
import { responseHeaders } from "../../api/proxy/headers.js";
import { ApiError } from "../../errors/api-error.js";
import { ForwardExchange, type ForwardRequest, type ForwardTarget } from "../../http/fast/exchange.js";
import { type FastConnection, FastListener } from "../../http/fast/listener.js";
import { DEFAULT_CONNECTION_LIMITS } from "../../http/limits.js";
import { UpstreamTimeout } from "../../http/upstream-timeout.js";
import { contentLength, fieldValues, HeadError, listsToken, type RequestHead } from "../../http/wire/head.js";
import { BadResponse } from "../../http/wire/response-body.js";
import { metrics } from "../../metrics/server-metrics.js";
import { type GatewayCall, type GatewayDeps, prepareCall, providerFailed } from "./call.js";

/** A connection to a provider is made within this (a provider that drops packets is given up on). */
const CONNECT_TIMEOUT_MS = 10_000;
/** From the request to the provider's response head, as the Node path's idle timeout (forward.ts). */
const RESPONSE_TIMEOUT_MS = 120_000;
/** Bodies the gateway forwards; nothing else is a gateway call (RFC 9110 §9). */
const METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** A call the fast path forwards, or the error it is answered (decided as the Node path decides it). */
export interface GatewayAdmitted extends ForwardRequest {
  readonly call?: GatewayCall;
  readonly error?: unknown;
}

/**
 * HTTP/1.1, a method above, an origin-form target, no upgrade, no `Expect`, no transfer coding, a
 * Content-Length of digits: the calls forwarded on raw connections. Anything else (a chunked
 * upload, a 100-continue) goes to Node's HTTP server and the same decisions (server.ts).
 */
function plain(head: RequestHead): ForwardRequest | undefined {
  const raw = head.rawHeaders;
  if (head.minorVersion !== 1 || !METHODS.has(head.method) || !head.target.startsWith("/")) return undefined;
  const connection = fieldValues(raw, "connection");
  if (listsToken(connection, "upgrade")) return undefined;
  if (fieldValues(raw, "upgrade").length > 0 || fieldValues(raw, "expect").length > 0) return undefined;
  if (fieldValues(raw, "transfer-encoding").length > 0) return undefined;
  try {
    return { bodyLength: contentLength(raw) ?? 0, close: listsToken(connection, "close") };
  } catch (err) {
    if (err instanceof HeadError) return undefined;
    throw err;
  }
}

/**
 * Issue #16 part 3: the connector gateway's calls forwarded on raw kept-alive connections to the
 * provider (TLS ones included), as the unit URL's are (http/fast/listener.ts), instead of through
 * Node's HTTP server and client. Every connection to the gateway's port starts here; what `plain`
 * does not take is handed to Node's server (server.ts) for the rest of the connection.
 */
export class FastGateway extends FastListener<GatewayAdmitted> {
  constructor(readonly deps: GatewayDeps) {
    super("gateway fast path", deps.log, (deps.limits ?? DEFAULT_CONNECTION_LIMITS).headersTimeoutMs);
  }

  async admit(head: RequestHead, socket: Socket): Promise<GatewayAdmitted | undefined> {
    const req = plain(head);
    if (!req) return undefined;
    const values = fieldValues(head.rawHeaders, "connection");
    try {
      const call = await prepareCall(this.deps, {
        method: head.method,
        target: head.target,
        remoteAddress: socket.remoteAddress,
        localAddress: socket.localAddress,
        connection: values.length > 0 ? values.join(", ") : undefined,
      });
      return { ...req, call };
    } catch (err) {
      return { ...req, error: err };
    }
  }

  exchange(conn: FastConnection<GatewayAdmitted>, head: RequestHead, admitted: GatewayAdmitted): GatewayExchange {
    // Issue #20 part 3: a body that stalls for the body idle timeout ends the call (408).
    const bodyIdleMs = (this.deps.limits ?? DEFAULT_CONNECTION_LIMITS).bodyIdleMs;
    return new GatewayExchange(conn, head, admitted, this, bodyIdleMs);
  }
}

/** One call to a provider: the caller's fields kept by `GatewayCall.keeps`, the gateway's own added. */
class GatewayExchange extends ForwardExchange<GatewayAdmitted> {
  constructor(
    conn: FastConnection<GatewayAdmitted>,
    head: RequestHead,
    admitted: GatewayAdmitted,
    private readonly gateway: FastGateway,
    bodyIdleMs: number,
  ) {
    super(conn, head, admitted, bodyIdleMs);
  }

  private get call(): GatewayCall {
    return this.admitted.call as GatewayCall;
  }

  protected async target(): Promise<ForwardTarget> {
    if (this.admitted.error !== undefined) throw this.admitted.error;
    const { url, pinned } = this.call;
    const https = url.protocol === "https:";
    const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    const port = url.port ? Number(url.port) : https ? 443 : 80;
    // A pinned address is the one checked (pinned-target.ts); the certificate is still the name's.
    const host = pinned?.address ?? hostname;
    if (!https) return { host, port };
    const ca = this.gateway.deps.ca;
    return { host, port, tls: { ...(isIP(hostname) === 0 && { servername: hostname }), ...(ca && { ca }) } };
  }

  protected requestHead(): string {
    const { url, keeps, fields } = this.call;
    let out = `${this.head.method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`;
    const raw = this.head.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i] as string;
      if (keeps(name.toLowerCase())) out += `${name}: ${raw[i + 1]}\r\n`;
    }
    for (const name in fields) out += `${name}: ${fields[name]}\r\n`;
    return `${out}\r\n`;
  }

  protected responseFields(rawHeaders: readonly string[]): string[] {
    return responseHeaders(rawHeaders);
  }

  protected timeoutMessage(phase: "connect" | "response"): { ms: number; message: string } {
    const key = this.call.providerKey;
    return phase === "connect"
      ? { ms: CONNECT_TIMEOUT_MS, message: `the provider (${key}) did not accept a connection in time` }
      : { ms: RESPONSE_TIMEOUT_MS, message: `the provider (${key}) did not answer in time` };
  }

  protected errorFor(err: unknown): unknown {
    if (err instanceof ApiError || !this.admitted.call) return err;
    const message = err instanceof Error ? err.message : String(err);
    this.gateway.deps.log.warn({ ...this.call.log, err: message }, "gateway upstream failed");
    if (err instanceof BadResponse || err instanceof UpstreamTimeout) {
      return new ApiError(502, providerFailed(this.call).code, `the provider (${this.call.providerKey}): ${message}`);
    }
    return providerFailed(this.call);
  }

  protected logged(status: number, complete: boolean): void {
    metrics.gatewayCall(complete ? status : 0);
    // The Node path's line too: one per answer of the provider's (its failures are warnings, errorFor).
    const call = this.admitted.call;
    if (!call || !this.responded) return;
    const ms = Math.round((performance.now() - call.startedAt) * 100) / 100;
    this.gateway.deps.log.info({ ...call.log, status, ms, fast: true }, "gateway");
  }
}
