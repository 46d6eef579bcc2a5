import type { ServiceEvent, ServiceRequest, ServiceResponse } from "@ums/protocol";
import { encodePath, type UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";
import { collectEvents } from "./ndjson.js";

export interface ServiceStreamOpts extends RequestOpts {
  /**
   * How long the server streams the service's start (its output and exit) before it completes the
   * stream, in milliseconds (the API's `duration`, default 5 s; 0 completes at once).
   */
  durationMs?: number | undefined;
  /** Called with each event (spec 6.4) as it arrives. */
  onEvent?: ((event: ServiceEvent) => void) | undefined;
}

export interface ServiceLogsOpts extends RequestOpts {
  /** The last `lines` lines of the log (default: all of it). */
  lines?: number | undefined;
  /** Then follow new lines for this long, in milliseconds (default 0: no follow). */
  followMs?: number | undefined;
  /** Called with each event as it arrives. */
  onEvent?: ((event: ServiceEvent) => void) | undefined;
}

/** The server's default `duration` of start, stop and restart streams (spec 8). */
const DEFAULT_STREAM_MS = 5_000;
const request = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });
const duration = (ms: number | undefined) => (ms === undefined ? undefined : `${Math.max(0, Math.round(ms))}ms`);

/**
 * `unit.services`: long-running processes the unit's supervisor keeps alive, restarts after a
 * crash and starts again when the unit boots (spec 2.7, 3.2, 4.6). The streaming operations
 * resolve with every event of the stream (the last one is `complete`) and throw a `StreamError`
 * when the stream reports an `error` event (e.g. a command that cannot start).
 */
export class Services {
  constructor(
    private readonly client: UmsClient,
    private readonly path: () => string,
  ) {}

  /** Every service of the unit with its state. */
  list(opts: RequestOpts = {}): Promise<ServiceResponse[]> {
    return this.client.request<ServiceResponse[]>("GET", `${this.path()}/services`, request(opts));
  }

  /** One service. Throws `NotFoundError` (`UMS_SERVICE_NOT_FOUND`) if there is none of that name. */
  get(name: string, opts: RequestOpts = {}): Promise<ServiceResponse> {
    return this.client.request<ServiceResponse>("GET", this.#svc(name), request(opts));
  }

  /**
   * Creates or replaces a service and starts it; resolves as soon as the definition is stored,
   * with the service's state (usually `starting`). Bad definitions throw `ValidationError`, a taken
   * `http_port` `ConflictError`.
   */
  put(name: string, def: ServiceRequest, opts: RequestOpts = {}): Promise<ServiceResponse> {
    return this.client.request<ServiceResponse>("PUT", this.#svc(name), {
      ...request(opts),
      query: { duration: "0" },
      body: { args: [], needs: [], ...def },
    });
  }

  /** Stops and deletes a service. Throws `ConflictError` while other services need it. */
  async remove(name: string, opts: RequestOpts = {}): Promise<void> {
    await this.client.request<void>("DELETE", this.#svc(name), request(opts));
  }

  /** Starts a service (and the services it needs); resolves when the stream completes. */
  start(name: string, opts: ServiceStreamOpts = {}): Promise<ServiceEvent[]> {
    return this.#control(name, "start", opts);
  }

  /** Stops a service; it stays stopped (across boots too) until started again. */
  stop(name: string, opts: ServiceStreamOpts = {}): Promise<ServiceEvent[]> {
    return this.#control(name, "stop", opts);
  }

  /** Stops the service if it runs, then starts it: `stopping`, `stopped`, `started`, output, `complete`. */
  restart(name: string, opts: ServiceStreamOpts = {}): Promise<ServiceEvent[]> {
    return this.#control(name, "restart", opts);
  }

  /** The service's log as `stdout`/`stderr` events (then new lines for `followMs`), ending with `complete`. */
  logs(name: string, opts: ServiceLogsOpts = {}): Promise<ServiceEvent[]> {
    return this.#stream(
      "GET",
      `${this.#svc(name)}/logs`,
      { lines: opts.lines, duration: duration(opts.followMs) },
      opts,
      opts.followMs ?? 0,
    );
  }

  /** start, stop and restart (spec 4.6): a POST whose stream follows the service for `durationMs`. */
  #control(name: string, action: "start" | "stop" | "restart", opts: ServiceStreamOpts): Promise<ServiceEvent[]> {
    return this.#stream(
      "POST",
      `${this.#svc(name)}/${action}`,
      { duration: duration(opts.durationMs) },
      opts,
      opts.durationMs,
    );
  }

  async #stream(
    method: "GET" | "POST",
    path: string,
    query: Record<string, string | number | undefined>,
    opts: RequestOpts & { onEvent?: ((event: ServiceEvent) => void) | undefined },
    streamMs = DEFAULT_STREAM_MS,
  ): Promise<ServiceEvent[]> {
    // The stream lasts `duration` by design: the default time limit counts from its end.
    const base = this.client.config.timeoutMs;
    const timeoutMs = opts.timeoutMs ?? (base > 0 ? base + Math.max(0, streamMs) : 0);
    const res = await this.client.open(method, path, { timeoutMs, signal: opts.signal, query });
    return collectEvents<ServiceEvent>(res, opts.onEvent);
  }

  #svc(name: string): string {
    return `${this.path()}${encodePath`/services/${name}`}`;
  }
}
