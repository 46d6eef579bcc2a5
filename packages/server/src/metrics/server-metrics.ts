import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { faultCounts } from "../faults.js";

// Issue #17 part 1: the server's Prometheus series. One registry per process (its own, not
// prom-client's global one): the code that counts (the lifecycle, the gateway, the resolver) is
// reached from many places, and a process runs one server (tests run several, and read deltas).
// No label ever holds a unit's or an organization's name or id: labels are route patterns,
// statuses and outcomes, from small fixed sets (metrics.test.ts checks every series).

/** Operations whose durations are observed (seconds). */
export type LifecycleOp = "boot" | "wake" | "checkpoint" | "restore" | "fork";
/** How a resolver lookup ended (network/unit-egress.ts). */
export type ResolverOutcome = "allowed" | "denied" | "open" | "failed";
export type FsDirection = "read" | "write";

/** What a unit's counts per status are read from at scrape time (the lifecycle of each server in the process). */
export type UnitCounts = () => { running: number; warm: number };

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

/** One route pattern and method's requests: counts by status, and the duration histogram. */
interface RequestEntry {
  readonly method: string;
  readonly route: string;
  readonly byStatus: Map<number, number>;
  /** Non-cumulative counts per bucket of REQUEST_BUCKETS, the last for +Inf. */
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * The request series, counted in plain numbers and turned into prom-client's shape only when
 * scraped. prom-client's own children validate and hash their labels on every call (about 10 µs
 * a request here); this is a map lookup and a bucket search.
 */
class RequestSeries {
  private readonly routes = new Map<string, Map<string, RequestEntry>>();

  observe(method: string, route: string, status: number, seconds: number): void {
    let byMethod = this.routes.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.routes.set(route, byMethod);
    }
    let e = byMethod.get(method);
    if (!e) {
      e = {
        method,
        route,
        byStatus: new Map(),
        buckets: new Float64Array(REQUEST_BUCKETS.length + 1),
        sum: 0,
        count: 0,
      };
      byMethod.set(method, e);
    }
    e.byStatus.set(status, (e.byStatus.get(status) ?? 0) + 1);
    let b = 0;
    while (b < REQUEST_BUCKETS.length && seconds > (REQUEST_BUCKETS[b] as number)) b++;
    (e.buckets as Float64Array)[b] = ((e.buckets as Float64Array)[b] as number) + 1;
    e.sum += seconds;
    e.count++;
  }

  private *entries(): Generator<RequestEntry> {
    for (const byMethod of this.routes.values()) yield* byMethod.values();
  }

  /** Registers the two series (a counter and a histogram) in `registry`. */
  register(registry: Registry): void {
    const entries = () => this.entries();
    registry.registerMetric({
      name: "ums_http_requests_total",
      help: "API requests answered, by method, route pattern and status",
      type: "counter",
      aggregator: "sum",
      get: async () => {
        const values: { labels: Record<string, string>; value: number }[] = [];
        for (const e of entries()) {
          for (const [status, n] of e.byStatus) {
            values.push({ labels: { method: e.method, route: e.route, status: String(status) }, value: n });
          }
        }
        return {
          name: "ums_http_requests_total",
          help: "API requests answered, by method, route pattern and status",
          type: "counter",
          aggregator: "sum",
          values,
        };
      },
      reset: () => {},
    } as never);
    registry.registerMetric({
      name: "ums_http_request_duration_seconds",
      help: "Time to answer an API request, by method and route pattern",
      type: "histogram",
      aggregator: "sum",
      get: async () => {
        const name = "ums_http_request_duration_seconds";
        const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
        for (const e of entries()) {
          const labels = { method: e.method, route: e.route };
          let acc = 0;
          for (let b = 0; b <= REQUEST_BUCKETS.length; b++) {
            acc += e.buckets[b] as number;
            const le = b < REQUEST_BUCKETS.length ? (REQUEST_BUCKETS[b] as number) : "+Inf";
            values.push({ labels: { ...labels, le }, value: acc, metricName: `${name}_bucket` });
          }
          values.push({ labels, value: e.sum, metricName: `${name}_sum` });
          values.push({ labels, value: e.count, metricName: `${name}_count` });
        }
        return {
          name,
          help: "Time to answer an API request, by method and route pattern",
          type: "histogram",
          aggregator: "sum",
          values,
        };
      },
      reset: () => {},
    } as never);
  }
}

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly requests = new RequestSeries();
  private readonly lifecycleSeconds = new Histogram({
    name: "ums_unit_operation_duration_seconds",
    help: "Duration of unit operations: boot (cold to running), wake (warm to running), checkpoint, restore, fork",
    labelNames: ["operation"] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  private readonly lifecycleFailures = new Counter({
    name: "ums_unit_operation_failures_total",
    help: "Unit operations that failed, by operation",
    labelNames: ["operation"] as const,
    registers: [this.registry],
  });
  /** Exec sessions (HTTP or websocket) relayed now: a plain number on the exec path, read at scrape time. */
  execSessionsOpen = 0;
  private readonly resolver = new Counter({
    name: "ums_resolver_lookups_total",
    help: "DNS lookups of units answered by their resolver, by outcome",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private readonly gateway = new Counter({
    name: "ums_gateway_requests_total",
    help: "Calls of units through the connector gateway, by status class (2xx..5xx)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private readonly fsBytes = new Counter({
    name: "ums_fs_bytes_total",
    help: "File bytes moved through the filesystem API, by direction (read: to clients, write: into units)",
    labelNames: ["direction"] as const,
    registers: [this.registry],
  });
  private readonly fsDescriptors = new Counter({
    name: "ums_fs_read_descriptors_total",
    help: "Large file reads a unit's agent answered with the file's descriptor, by outcome (sent: with sendfile; refused: the descriptor failed the checks, the read went as bytes)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly samplerCpuSeconds = new Counter({
    name: "ums_usage_sampler_cpu_seconds_total",
    help: "CPU time (user + system) the per-unit usage sampler spent",
    registers: [this.registry],
  });
  readonly samplerUnits = new Gauge({
    name: "ums_usage_sampler_units",
    help: "Units the usage sampler read at its last pass",
    registers: [this.registry],
  });
  private readonly unitSources = new Set<UnitCounts>();
  private defaultsOn = false;

  // Pre-bound children: one label lookup per outcome, never per request.
  private readonly resolverChild: Record<ResolverOutcome, { inc(n?: number): void }>;
  private readonly fsChild: Record<FsDirection, { inc(n: number): void }>;
  private readonly opChild: Record<LifecycleOp, { observe(v: number): void }>;

  constructor() {
    const reg = [this.registry];
    this.requests.register(this.registry);
    this.resolverChild = {
      allowed: this.resolver.labels("allowed"),
      denied: this.resolver.labels("denied"),
      open: this.resolver.labels("open"),
      failed: this.resolver.labels("failed"),
    };
    this.fsChild = { read: this.fsBytes.labels("read"), write: this.fsBytes.labels("write") };
    this.opChild = {
      boot: this.lifecycleSeconds.labels("boot"),
      wake: this.lifecycleSeconds.labels("wake"),
      checkpoint: this.lifecycleSeconds.labels("checkpoint"),
      restore: this.lifecycleSeconds.labels("restore"),
      fork: this.lifecycleSeconds.labels("fork"),
    };
    // Every fixed label set is exposed from the start (at 0): a rate over a series that appears late is wrong.
    for (const c of Object.values(this.resolverChild)) c.inc(0);
    for (const outcome of ["sent", "refused"]) this.fsDescriptors.labels(outcome).inc(0);
    for (const c of Object.values(this.fsChild)) c.inc(0);
    for (const cls of ["2xx", "3xx", "4xx", "5xx", "error"]) this.gateway.labels(cls).inc(0);
    for (const op of ["boot", "wake", "checkpoint", "restore", "fork"]) this.lifecycleFailures.labels(op).inc(0);
    const self = this;
    new Gauge({
      name: "ums_exec_sessions_open",
      help: "Exec sessions (HTTP or websocket) the server relays now",
      registers: reg,
      collect() {
        this.set(self.execSessionsOpen);
      },
    });
    const sources = this.unitSources;
    new Gauge({
      name: "ums_units",
      help: "Units this server's node holds, by status (cold units are not counted: they cost nothing)",
      labelNames: ["status"] as const,
      registers: reg,
      collect() {
        let running = 0;
        let warm = 0;
        for (const s of sources) {
          const c = s();
          running += c.running;
          warm += c.warm;
        }
        this.set({ status: "running" }, running);
        this.set({ status: "warm" }, warm);
      },
    });
    new Gauge({
      name: "ums_faults",
      help: "Errors nothing handled (logged, the server kept serving), by kind, since the process started",
      labelNames: ["kind"] as const,
      registers: reg,
      collect() {
        const f = faultCounts();
        this.set({ kind: "uncaught_exception" }, f.uncaughtException);
        this.set({ kind: "unhandled_rejection" }, f.unhandledRejection);
      },
    });
  }

  /** Node's process metrics (memory, CPU, handles, GC) and event-loop lag; once per process, when metrics are on. */
  enableDefaults(): void {
    if (this.defaultsOn) return;
    this.defaultsOn = true;
    collectDefaultMetrics({ register: this.registry, prefix: "ums_", eventLoopMonitoringPrecision: 20 });
  }

  /** Counts the lifecycle of a node; returns the call that stops counting it. */
  addUnitSource(source: UnitCounts): () => void {
    this.unitSources.add(source);
    return () => this.unitSources.delete(source);
  }

  /**
   * One answered request: `route` is the route's pattern (`/v1/units/:name/exec`), never its URL;
   * undefined for a request no route matched.
   */
  request(method: string, route: string | undefined, status: number, seconds: number): void {
    this.requests.observe(method, route ?? "unmatched", status, seconds);
  }

  operation(op: LifecycleOp, seconds: number): void {
    this.opChild[op].observe(seconds);
  }

  operationFailed(op: LifecycleOp): void {
    this.lifecycleFailures.labels(op).inc();
  }

  resolverLookup(outcome: ResolverOutcome): void {
    this.resolverChild[outcome].inc();
  }

  gatewayCall(status: number): void {
    const cls = status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : "error";
    this.gateway.labels(cls).inc();
  }

  fs(direction: FsDirection, bytes: number): void {
    if (bytes > 0) this.fsChild[direction].inc(bytes);
  }

  /** Issue #16: a read answered with a descriptor, sent with sendfile or refused (agent/fd-read.ts). */
  fsDescriptor(outcome: "sent" | "refused"): void {
    this.fsDescriptors.labels(outcome).inc();
  }

  /** The exposition (text format 0.0.4). */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/** The process's metrics. */
export const metrics = new ServerMetrics();
