import type { ResolvedProvider } from "../registry/registry.js";
import type { Secrets } from "../secrets/secrets.js";
import { signSigV4 } from "./sigv4.js";

export interface UpstreamRequest {
  readonly method: string;
  readonly url: URL;
}

/**
 * The headers that carry a connector's credential to the provider (issue #7): bearer (RFC 6750),
 * a custom header, basic (RFC 7617), or an AWS SigV4 signature over this very request.
 */
export function credentialHeaders(p: ResolvedProvider, s: Secrets, req: UpstreamRequest): Record<string, string> {
  const secret = s.umsToken ?? s.accessToken ?? s.apiKey;
  if (secret === undefined) return {};
  const auth = p.auth;
  switch (auth.kind) {
    case "bearer":
      return { authorization: `Bearer ${secret}` };
    case "header":
      return { [auth.name]: secret };
    case "basic":
      return { authorization: `Basic ${Buffer.from(secret.includes(":") ? secret : `${secret}:`).toString("base64")}` };
    case "sigv4": {
      const [accessKeyId = "", secretAccessKey = "", region] = secret.split(":");
      return signSigV4({
        method: req.method,
        host: req.url.host,
        path: req.url.pathname,
        query: req.url.search.slice(1),
        accessKeyId,
        secretAccessKey,
        region: region || auth.region,
        service: auth.service,
      });
    }
  }
}

/** Header names a caller may not send on: its own credentials and hop-by-hop fields (RFC 9110 §7.6.1). */
const STRIPPED: ReadonlySet<string> = new Set([
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  // The gateway answered any 100-continue itself and sends the body at once.
  "expect",
  "authorization",
  "cookie",
  "x-api-key",
  "api-key",
  "x-auth-token",
  "private-token",
  "forwarded",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "x-real-ip",
]);

/**
 * Whether a header (by its lower-case name) is kept from the provider: the fixed list above, the
 * provider's own credential header, and the names the caller's `Connection` lists (hop-by-hop).
 * A test per call, not a set built per call (issue #16 part 3: every gateway call asks it).
 */
export function strippedHeader(p: ResolvedProvider, connection: string | undefined): (name: string) => boolean {
  const own = p.auth.kind === "header" ? p.auth.name.toLowerCase() : undefined;
  const listed =
    connection === undefined
      ? undefined
      : connection
          .split(",")
          .map((n) => n.trim().toLowerCase())
          .filter((n) => n !== "");
  return (name) => STRIPPED.has(name) || name === own || listed?.includes(name) === true;
}
