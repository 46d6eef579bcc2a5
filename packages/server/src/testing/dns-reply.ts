import * as dns from "dns-packet";

/** The fake DNS servers of the tests: a query as decoded, or undefined when `msg` is none (ignored). */
export function decodeQuery(msg: Buffer): dns.DecodedPacket | undefined {
  try {
    return dns.decode(msg);
  } catch {
    return undefined;
  }
}

/**
 * The response to `query` (RFC 1035 §4.1.1): its id, `questions` and `answers`, recursion
 * available, and `rcode` (0 NOERROR, 3 NXDOMAIN).
 */
export function encodeResponse(
  query: dns.DecodedPacket,
  questions: dns.Question[],
  answers: dns.Answer[],
  rcode: number,
): Buffer {
  return dns.encode({
    type: "response",
    id: query.id ?? 0,
    flags: dns.RECURSION_AVAILABLE | rcode,
    questions,
    answers,
  });
}
