import type { IncomingMessage, ServerResponse } from "node:http";

/** The most of a request body read and dropped after an early answer, to keep the connection. */
export const DRAIN_MAX_BYTES = 16 * 1024 * 1024;
/** How long dropping it may take before the connection is closed. */
export const DRAIN_MAX_MS = 30_000;

/**
 * For an answer given before the request's body was read (issue #19 finding 10: the unit or the
 * provider was not reached), called before the answer's head is written. The rest of the body is
 * read and dropped, so the connection can carry the next request (RFC 9112 §9.3: it starts after
 * this body); an unread body would block the connection for good. Bounded: a body declared
 * larger than DRAIN_MAX_BYTES is not waited for (the answer says `Connection: close`, RFC 9112
 * §9.6); one that turns out larger (chunked) or takes longer than DRAIN_MAX_MS ends the connection.
 */
export function dropUnreadBody(req: IncomingMessage, res: ServerResponse): void {
  req.unpipe();
  if (req.readableEnded) return;
  const length = req.headers["content-length"];
  if (length !== undefined && !(Number(length) <= DRAIN_MAX_BYTES)) res.shouldKeepAlive = false;
  let read = 0;
  const stop = () => {
    done();
    req.socket.destroy();
  };
  const onData = (d: Buffer) => {
    read += d.length;
    if (read > DRAIN_MAX_BYTES) stop();
  };
  const timer = setTimeout(stop, DRAIN_MAX_MS);
  timer.unref();
  const done = () => {
    clearTimeout(timer);
    req.off("data", onData);
  };
  req.on("data", onData);
  req.once("end", done);
  req.once("close", done);
  req.resume();
}
