import { EventEmitter } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";

// Issue #17: what ums serve follows of a unit's services (GET /service-events on the agent socket):
// a service that crashed (exited while it was to run) and one restarted after its backoff. Nothing
// is kept: an event with no follower connected is not seen by anyone.

export type ServiceLifecycleEvent =
  | { type: "crashed"; service: string; exit_code: number; restart_in_ms: number; error?: string }
  | { type: "restarted"; service: string; restart_count: number };

const bus = new EventEmitter();
bus.setMaxListeners(0);

export function emitServiceEvent(e: ServiceLifecycleEvent): void {
  bus.emit("event", { ...e, timestamp: new Date().toISOString() });
}

/** An NDJSON stream of the events as they happen, until the client goes. */
export function serveServiceEvents(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  res.flushHeaders();
  const send = (e: object) => {
    if (!res.writableEnded) res.write(`${JSON.stringify(e)}\n`);
  };
  bus.on("event", send);
  res.on("close", () => bus.off("event", send));
}
