import type { FastifyReply } from "fastify";

/**
 * An NDJSON response (spec section 6): one object per line, flushed as it happens. A failure after
 * the first line becomes an `error` event, never a silently cut stream (docs/ARCHITECTURE.md section 10).
 */
export function ndjson(reply: FastifyReply): { send(event: object): void; end(): void } {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    "content-type": "application/x-ndjson",
    "cache-control": "no-store",
    "x-accel-buffering": "no",
  });
  return {
    send(event) {
      if (!res.writableEnded) res.write(`${JSON.stringify(event)}\n`);
    },
    end() {
      if (!res.writableEnded) res.end();
    },
  };
}
