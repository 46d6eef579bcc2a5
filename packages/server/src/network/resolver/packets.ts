import * as dns from "dns-packet";

/** DNS response codes used here (RFC 1035 section 4.1.1). */
export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, REFUSED: 5 } as const;

export interface Query {
  readonly id: number;
  readonly name: string;
  readonly type: string;
  /** Whether the client asked for recursion (echoed in the answer, RFC 1035 section 4.1.1). */
  readonly rd: boolean;
  readonly question: dns.Question;
}

/** The one question of a query (RFC 9619: QDCOUNT is 1), or undefined when it is no such query. */
export function parseQuery(buf: Buffer): Query | undefined {
  const p = decode(buf);
  const q = p?.questions?.[0];
  if (p?.type !== "query" || !q || p.questions?.length !== 1 || typeof q.name !== "string") return undefined;
  return {
    id: p.id ?? 0,
    name: q.name.toLowerCase().replace(/\.$/, ""),
    type: String(q.type),
    rd: ((p.flags ?? 0) & dns.RECURSION_DESIRED) !== 0,
    question: q,
  };
}

/** The id of a raw query or answer, or -1 when the buffer is too short for a header. */
export function packetId(buf: Buffer): number {
  return buf.length >= 12 ? buf.readUInt16BE(0) : -1;
}

/** An answer to `q` of our own: an rcode and optional answer records. */
export function respond(q: Query, rcode: number, answers: dns.Answer[] = []): Buffer {
  return dns.encode({
    type: "response",
    id: q.id,
    flags: (q.rd ? dns.RECURSION_DESIRED : 0) | dns.RECURSION_AVAILABLE | rcode,
    questions: [q.question],
    answers,
  });
}

/** FORMERR for a packet we could not read as a query, when its header at least has an id. */
export function formErr(buf: Buffer): Buffer | undefined {
  const id = packetId(buf);
  if (id < 0) return undefined;
  return dns.encode({ type: "response", id, flags: RCODE.FORMERR });
}

export interface AddressAnswer {
  readonly ip: string;
  readonly ttlS: number;
}

export interface UpstreamAnswer {
  readonly rcode: number;
  readonly truncated: boolean;
  /** The IPv4 addresses in the answer section (after any CNAME chain), each with its TTL. */
  readonly addresses: readonly AddressAnswer[];
}

/** Reads what the policy needs from an upstream answer; undefined when it is not a DNS answer. */
export function readAnswer(buf: Buffer): UpstreamAnswer | undefined {
  const p = decode(buf);
  if (p?.type !== "response") return undefined;
  const flags = p.flags ?? 0;
  const addresses = (p.answers ?? []).flatMap((a) =>
    a.type === "A" && typeof a.data === "string" ? [{ ip: a.data, ttlS: Math.max(0, a.ttl ?? 0) }] : [],
  );
  return { rcode: flags & 0xf, truncated: (flags & dns.TRUNCATED_RESPONSE) !== 0, addresses };
}

/** The packet, or undefined when `buf` is not one dns-packet can read. */
function decode(buf: Buffer): dns.DecodedPacket | undefined {
  try {
    return dns.decode(buf);
  } catch {
    return undefined;
  }
}

/** Gives a raw packet another id (the resolver's own towards the upstream, the client's back). */
export function withId(buf: Buffer, id: number): Buffer {
  const out = Buffer.from(buf);
  out.writeUInt16BE(id, 0);
  return out;
}
