import { IDEMPOTENT, isStaleConnection } from "@ums/protocol/retry";
import { ConnectionConfig, type ConnectionOpts, checkTimeout, type RequestOpts } from "./config.js";
import { ConnectionError, errorFromResponse, SdkErrorCode, TimeoutError, UmsError } from "./errors.js";
import { Images } from "./images.js";
import { Nodes } from "./nodes.js";
import { Templates } from "./templates.js";

export const SDK_VERSION = "0.1.0";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export type QueryValue = string | number | boolean | readonly string[] | undefined;

export interface ApiRequestOpts extends RequestOpts {
  /** Query parameters; undefined values are left out, arrays repeat the parameter. */
  query?: Readonly<Record<string, QueryValue>> | undefined;
  /** Sent as JSON. Left undefined, the request has no body and no Content-Type. */
  body?: unknown;
}

/**
 * The HTTP transport: one per server and token, shared by every `Unit` it returns. It adds the
 * bearer token, applies time limits, and turns every failure into a `UmsError`.
 */
export class UmsClient {
  readonly config: ConnectionConfig;

  constructor(opts: ConnectionOpts = {}) {
    this.config = new ConnectionConfig(opts);
  }

  get baseUrl(): string {
    return this.config.baseUrl;
  }

  /** The images units are created from (issue #18). */
  get images(): Images {
    return new Images(this);
  }

  /** The organization's templates (issue #18). */
  get templates(): Templates {
    return new Templates(this);
  }

  /** The nodes, the hosts that run units (issue #15); admin tokens only. */
  get nodes(): Nodes {
    return new Nodes(this);
  }

  /**
   * Sends one API request and returns its parsed JSON body (undefined for 204). Low level:
   * `path` starts with `/v1/`; path segments must already be encoded (see `encodePath`).
   */
  async request<T>(method: HttpMethod, path: string, opts: ApiRequestOpts = {}): Promise<T> {
    // The server rejects an empty body declared as JSON, so bodiless requests send no Content-Type.
    const json = opts.body !== undefined;
    const res = await this.open(method, path, {
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
      query: opts.query,
      headers: { accept: "application/json", ...(json && { "content-type": "application/json" }) },
      body: json ? JSON.stringify(opts.body) : undefined,
    });
    const text = await res.text();
    if (text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new UmsError(
        `${method} ${path} answered ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`,
        SdkErrorCode.BadResponse,
        { status: res.status },
      );
    }
  }

  /**
   * Sends one request and returns the response once its status is known, for bodies read as a
   * stream (file bytes, NDJSON). A non-2xx answer is thrown as a `UmsError`. The time limit covers
   * reading the body too; failures while reading it become `TimeoutError`/`ConnectionError`.
   */
  async open(method: HttpMethod, path: string, opts: RawRequestOpts = {}): Promise<Response> {
    const url = new URL(this.config.baseUrl + path);
    addQuery(url, opts.query);
    const headers: Record<string, string> = {
      "user-agent": `ums-sdk-js/${SDK_VERSION}`,
      ...this.config.headers,
      ...opts.headers,
      authorization: `Bearer ${this.config.token}`,
    };
    const timeoutMs = checkTimeout(opts.timeoutMs ?? this.config.timeoutMs, "timeoutMs");
    const timeout = timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : undefined;
    const signals = [timeout, opts.signal].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    const translate = (err: unknown): unknown => {
      if (opts.signal?.aborted) return opts.signal.reason;
      if (err instanceof UmsError) return err;
      if (timeout?.aborted) {
        return new TimeoutError(`${method} ${path} did not finish within ${timeoutMs} ms`, SdkErrorCode.Timeout, {
          cause: err,
        });
      }
      return new ConnectionError(`${method} ${url.origin}${path} failed: ${describe(err)}`, SdkErrorCode.Connection, {
        cause: err,
      });
    };
    const init: RequestInit & { duplex?: "half" } = { method, headers, signal: signal ?? null };
    if (opts.body !== undefined) {
      init.body = opts.body;
      if (opts.body instanceof ReadableStream) init.duplex = "half";
    }
    // Once more on a fresh connection when a kept-alive one was closing (retry.ts); not a stream body (read once).
    const retry = IDEMPOTENT.has(method) && !(opts.body instanceof ReadableStream);
    let res: Response;
    for (let attempt = 1; ; attempt++) {
      try {
        res = await this.config.fetch(url, init);
        break;
      } catch (err) {
        if (attempt === 1 && retry && !signal?.aborted && isStaleConnection(err)) continue;
        throw translate(err);
      }
    }
    if (!res.ok) {
      let text = "";
      try {
        text = await res.text();
      } catch (err) {
        throw translate(err);
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      throw errorFromResponse(res.status, res.statusText, parsed, text);
    }
    return withTranslatedBody(res, translate);
  }
}

/** The response with a body whose read errors (abort, reset) are thrown as the SDK's errors. */
function withTranslatedBody(res: Response, translate: (err: unknown) => unknown): Response {
  if (res.body === null) return res;
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (err) {
        controller.error(translate(err));
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

export interface RawRequestOpts extends RequestOpts {
  query?: Readonly<Record<string, QueryValue>> | undefined;
  /** Sent as is (a stream is sent with `duplex: "half"`). */
  body?: string | Uint8Array | ReadableStream<Uint8Array> | undefined;
  headers?: Readonly<Record<string, string>> | undefined;
}

export function addQuery(url: URL, query: Readonly<Record<string, QueryValue>> | undefined): void {
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v === undefined) continue;
    if (typeof v === "object") for (const item of v) url.searchParams.append(k, item);
    else url.searchParams.set(k, String(v));
  }
}

/** Builds a path from literal parts and values to encode, e.g. `encodePath\`/v1/units/${name}\``. */
export function encodePath(parts: TemplateStringsArray, ...values: string[]): string {
  return parts.reduce(
    (acc, part, i) => acc + part + (i < values.length ? encodeURIComponent(values[i] ?? "") : ""),
    "",
  );
}

/** Options that can carry a ready client instead of connection settings. */
export interface ClientOpts extends ConnectionOpts {
  /** Reuse this client (its server, token and default timeout); the connection fields are then ignored. */
  client?: UmsClient | undefined;
}

export function resolveClient(opts: ClientOpts = {}): UmsClient {
  return opts.client ?? new UmsClient(opts);
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause =
    err.cause instanceof Error ? `: ${(err.cause as Error & { code?: string }).code ?? err.cause.message}` : "";
  return `${err.message}${cause}`;
}
