import { AsyncLocalStorage } from "node:async_hooks";
import type { Logger } from "pino";

// Issue #17 part 5: OpenTelemetry spans for API requests and the agent calls they make, exported
// over OTLP/HTTP only when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set. Without it nothing is loaded (the exporter is a dynamic import) and every hook below is a
// check of one undefined variable. The exporter is ums's own (otlp.ts: OTLP/HTTP with JSON
// encoding), not the OpenTelemetry SDK: see docs/EVENTS.md "Tracing".

export interface Span {
  readonly traceId: string;
  readonly spanId: string;
  setAttribute(key: string, value: string | number | boolean): void;
  /** Ends the span; `error` marks it failed. */
  end(error?: string): void;
}

export interface Tracer {
  startSpan(
    name: string,
    opts: {
      kind: "server" | "client" | "internal";
      parent?: { traceId: string; spanId: string } | undefined;
      attributes?: Record<string, string | number | boolean>;
    },
  ): Span;
  close(): Promise<void>;
}

let tracer: Tracer | undefined;
const current = new AsyncLocalStorage<Span>();

/** The tracer, when tracing is on. */
export function activeTracer(): Tracer | undefined {
  return tracer;
}

/** Starts the exporter when the environment names an OTLP endpoint; otherwise does nothing. */
export async function openTracing(env: NodeJS.ProcessEnv, log: Logger): Promise<Tracer | undefined> {
  const endpoint =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces` : "");
  if (!endpoint || (env.OTEL_TRACES_EXPORTER ?? "otlp") === "none") return undefined;
  const { OtlpTracer } = await import("./otlp.js");
  tracer = new OtlpTracer({ endpoint, serviceName: env.OTEL_SERVICE_NAME || "ums", log });
  log.info({ endpoint }, "tracing: spans are exported over OTLP/HTTP");
  return tracer;
}

export async function closeTracing(): Promise<void> {
  const t = tracer;
  tracer = undefined;
  await t?.close();
}

/** Runs `fn` with `span` as the current span (its agent calls become its children). */
export function runInSpan<T>(span: Span, fn: () => T): T {
  return current.run(span, fn);
}

/** W3C trace context: `00-<trace id>-<parent id>-<flags>`. */
export function parseTraceparent(value: unknown): { traceId: string; spanId: string } | undefined {
  if (typeof value !== "string") return undefined;
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(value.trim());
  if (!m || /^0+$/.test(m[1] as string) || /^0+$/.test(m[2] as string)) return undefined;
  return { traceId: m[1] as string, spanId: m[2] as string };
}

/** A client span for one call to a unit's agent, child of the current request's span; undefined when off. */
export function agentSpan(method: string, path: string): Span | undefined {
  if (!tracer) return undefined;
  const parent = current.getStore();
  return tracer.startSpan(`agent ${method} ${path.split("?")[0]}`, {
    kind: "client",
    parent,
    attributes: { "http.request.method": method, "url.path": path.split("?")[0] ?? path, "ums.peer": "agent" },
  });
}
