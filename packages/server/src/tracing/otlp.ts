import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { Span, Tracer } from "./tracing.js";

/** Spans waiting to be sent at most (more are dropped and counted). */
const MAX_QUEUED = 2048;
const FLUSH_MS = 1000;
const BATCH = 512;
const SEND_TIMEOUT_MS = 10_000;

interface Finished {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: Record<string, unknown> }[];
  status: { code: number; message?: string };
}

const KIND = { internal: 1, server: 2, client: 3 } as const;

function attr(key: string, v: string | number | boolean) {
  const value =
    typeof v === "string"
      ? { stringValue: v }
      : typeof v === "boolean"
        ? { boolValue: v }
        : Number.isInteger(v)
          ? { intValue: String(v) }
          : { doubleValue: v };
  return { key, value };
}

/** Nanoseconds since the epoch, as OTLP's JSON encoding wants them (a decimal string). */
function nowNano(): string {
  const ms = performance.timeOrigin + performance.now();
  return (BigInt(Math.floor(ms * 1000)) * 1000n).toString();
}

/**
 * A minimal OpenTelemetry tracer: spans batched and POSTed to an OTLP/HTTP endpoint with the JSON
 * encoding (OTLP 1.x, `ExportTraceServiceRequest`), every second or 512 spans; a queue of at most
 * 2048 (more are dropped); a failed export is logged and its spans dropped (no retry).
 */
export class OtlpTracer implements Tracer {
  private queue: Finished[] = [];
  private dropped = 0;
  private readonly timer: NodeJS.Timeout;
  private sending: Promise<void> = Promise.resolve();
  private warned = false;

  constructor(private readonly o: { endpoint: string; serviceName: string; log: Logger }) {
    this.timer = setInterval(() => this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  startSpan(
    name: string,
    opts: {
      kind: "server" | "client" | "internal";
      parent?: { traceId: string; spanId: string } | undefined;
      attributes?: Record<string, string | number | boolean>;
    },
  ): Span {
    const traceId = opts.parent?.traceId ?? randomBytes(16).toString("hex");
    const spanId = randomBytes(8).toString("hex");
    const start = nowNano();
    const attributes = { ...opts.attributes };
    let ended = false;
    return {
      traceId,
      spanId,
      setAttribute: (k, v) => {
        attributes[k] = v;
      },
      end: (error) => {
        if (ended) return;
        ended = true;
        this.push({
          traceId,
          spanId,
          ...(opts.parent && { parentSpanId: opts.parent.spanId }),
          name,
          kind: KIND[opts.kind],
          startTimeUnixNano: start,
          endTimeUnixNano: nowNano(),
          attributes: Object.entries(attributes).map(([k, v]) => attr(k, v)),
          status: error ? { code: 2, message: error.slice(0, 256) } : { code: 0 },
        });
      },
    };
  }

  private push(s: Finished): void {
    if (this.queue.length >= MAX_QUEUED) {
      this.dropped += 1;
      return;
    }
    this.queue.push(s);
    if (this.queue.length >= BATCH) this.flush();
  }

  private flush(): void {
    if (this.queue.length === 0) return;
    const spans = this.queue.splice(0, BATCH);
    const body = JSON.stringify({
      resourceSpans: [
        {
          resource: { attributes: [attr("service.name", this.o.serviceName)] },
          scopeSpans: [{ scope: { name: "ums", version: "0.1.0" }, spans }],
        },
      ],
    });
    this.sending = this.sending.then(async () => {
      try {
        const res = await fetch(this.o.endpoint, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
        });
        await res.arrayBuffer().catch(() => {});
        if (!res.ok) throw new Error(`the collector answered ${res.status}`);
        this.warned = false;
      } catch (err) {
        if (!this.warned)
          this.o.log.warn({ err, dropped: spans.length }, "tracing: exporting spans failed; they are dropped");
        this.warned = true;
      }
    });
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    while (this.queue.length > 0) this.flush();
    await this.sending;
    if (this.dropped > 0) this.o.log.warn({ dropped: this.dropped }, "tracing: spans were dropped (queue full)");
  }
}
