import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { activeTracer, parseTraceparent, runInSpan } from "./tracing.js";

/**
 * A server span per API request (when tracing is on): named by the route's pattern, a child of
 * the caller's `traceparent` when it sends one; agent calls made while handling it are its
 * children. Nothing is added when tracing is off.
 */
export function addRequestSpans(app: FastifyInstance): void {
  const tracer = activeTracer();
  if (!tracer) return;
  app.addHook("onRequest", (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    const route = req.routeOptions.url ?? "(no route)";
    const span = tracer.startSpan(`${req.method} ${route}`, {
      kind: "server",
      parent: parseTraceparent(req.headers.traceparent),
      attributes: { "http.request.method": req.method, "http.route": route },
    });
    // Ends when the answer is done, streamed and hijacked ones too.
    reply.raw.once("close", () => {
      const status = reply.raw.statusCode;
      span.setAttribute("http.response.status_code", status);
      span.end(status >= 500 ? `answered ${status}` : undefined);
    });
    runInSpan(span, done);
  });
}
