import type { IncomingMessage } from "node:http";

/**
 * RFC 9110 §7.6.1: connection-specific fields are for one hop only and never forwarded, nor any
 * field that `Connection` names. `proxy-authorization` is meant for this proxy; `expect` is
 * answered by this server already (Node answers `100-continue` itself).
 */
const HOP_BY_HOP = new Set([
  "connection",
  "proxy-connection",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "proxy-authorization",
  "expect",
]);

/** The fields that `Connection` names (lowercased). */
function connectionNamed(rawHeaders: readonly string[]): Set<string> {
  const named = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] ?? "").toLowerCase() !== "connection") continue;
    for (const token of (rawHeaders[i + 1] ?? "").split(",")) {
      const t = token.trim().toLowerCase();
      if (t) named.add(t);
    }
  }
  return named;
}

export interface RequestHeaderRules {
  /** Drop `Authorization` (it carried the ums token). */
  readonly dropAuthorization: (value: string) => boolean;
  /** Cookie names of ours, removed from `Cookie` before the unit sees it. */
  readonly dropCookies?: readonly string[];
  /** Keep `Upgrade` and `Connection: upgrade` (a websocket or other upgrade handshake). */
  readonly upgrade: boolean;
  /** What the client asked for: X-Forwarded-Host / -Proto. */
  readonly forwardedHost: string;
  readonly forwardedProto: "http" | "https";
}

/** Removes cookies from a `Cookie` header value; undefined when nothing is left. */
export function withoutCookie(value: string, names: string | readonly string[]): string | undefined {
  const drop = typeof names === "string" ? [names] : names;
  const kept = value
    .split(";")
    .map((c) => c.trim())
    .filter((c) => c !== "" && !drop.includes(c.split("=")[0]?.trim() ?? ""));
  return kept.length > 0 ? kept.join("; ") : undefined;
}

/** `for=` of RFC 7239: IPv6 addresses are quoted and bracketed. */
function forwardedNode(ip: string): string {
  return ip.includes(":") ? `"[${ip}]"` : ip;
}

/**
 * The request headers the unit receives, in raw `[name, value, …]` form (case and repeated fields
 * kept): hop-by-hop fields and our credentials removed, X-Forwarded-* and Forwarded appended to
 * any the client sent (the chain of proxies in front of us stays visible).
 */
export function requestHeaders(req: IncomingMessage, rules: RequestHeaderRules): string[] {
  return forwardedHeaders(req.rawHeaders, req.socket.remoteAddress ?? "unknown", rules);
}

/** `requestHeaders` of a head read elsewhere than by Node (api/unit-url/fast-path.ts): its fields and client address. */
export function forwardedHeaders(raw: readonly string[], ip: string, rules: RequestHeaderRules): string[] {
  const named = connectionNamed(raw);
  const out: string[] = [];
  let xff: string | undefined;
  let forwarded: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? "";
    let value = raw[i + 1] ?? "";
    const lower = name.toLowerCase();
    if (lower === "upgrade" && rules.upgrade) {
      out.push(name, value);
      continue;
    }
    if (HOP_BY_HOP.has(lower) || named.has(lower)) continue;
    if (lower === "authorization" && rules.dropAuthorization(value)) continue;
    if (lower === "cookie" && rules.dropCookies) {
      const rest = withoutCookie(value, rules.dropCookies);
      if (rest === undefined) continue;
      value = rest;
    }
    if (lower === "x-forwarded-for") {
      xff = xff ? `${xff}, ${value}` : value;
      continue;
    }
    if (lower === "forwarded") {
      forwarded = forwarded ? `${forwarded}, ${value}` : value;
      continue;
    }
    // Ours to set: whatever a client claims here would be believed by the unit.
    if (lower === "x-forwarded-host" || lower === "x-forwarded-proto") continue;
    out.push(name, value);
  }
  out.push("X-Forwarded-For", xff ? `${xff}, ${ip}` : ip);
  out.push("X-Forwarded-Host", rules.forwardedHost);
  out.push("X-Forwarded-Proto", rules.forwardedProto);
  const node = `for=${forwardedNode(ip)};host="${rules.forwardedHost.replace(/["\\]/g, "")}";proto=${rules.forwardedProto}`;
  out.push("Forwarded", forwarded ? `${forwarded}, ${node}` : node);
  if (rules.upgrade) out.push("Connection", "Upgrade");
  return out;
}

/** The unit's response headers for the client, in raw form: hop-by-hop fields removed. */
export function responseHeaders(rawHeaders: readonly string[], opts: { upgrade?: boolean } = {}): string[] {
  const named = connectionNamed(rawHeaders);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? "";
    const lower = name.toLowerCase();
    if (opts.upgrade && (lower === "upgrade" || lower === "connection")) {
      out.push(name, rawHeaders[i + 1] ?? "");
      continue;
    }
    if (HOP_BY_HOP.has(lower) || named.has(lower)) continue;
    out.push(name, rawHeaders[i + 1] ?? "");
  }
  return out;
}
