/**
 * Requests that may be sent again when the connection they went out on turned out to be closing:
 * a kept-alive connection the server closes as idle (its Keep-Alive timeout) may take a request in
 * the same instant, which then fails with a reset and no answer. RFC 9112 §9.3.1 lets a client
 * retransmit such a request when its method is idempotent (RFC 9110 §9.2.2); others are the
 * caller's to decide (the server may have acted on them).
 */
export const IDEMPOTENT: ReadonlySet<string> = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

/** A failure of the connection itself, before any answer (not a refusal: the server is not there then). */
export function isStaleConnection(err: unknown): boolean {
  const cause = (err as { cause?: { code?: unknown } } | undefined)?.cause;
  const code = cause?.code;
  return code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET";
}
