import { hashToken, tokenExpired } from "../../auth/tokens.js";
import type { ServerConfig } from "../../config.js";
import { contentLength, fieldValues, HeadError, listsToken, type RequestHead } from "../../http/wire/head.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { CONSOLE_COOKIE } from "../console/session.js";
import type { RequestHeaderRules } from "../proxy/headers.js";
import { PROXY_METHODS } from "../proxy/routes.js";
import { readCookie, SESSION_COOKIE, verifySession } from "./cookie.js";
import { RESERVED_PREFIX, umsBearer, unitLabel } from "./routes.js";

/** A unit URL request the fast path forwards itself: every check of `unitUrlRoutes` passed. */
export interface Admitted {
  readonly unit: UnitRecord;
  readonly org: OrgRecord;
  /** Bytes of body that follow the head (Content-Length; 0 without one). */
  readonly bodyLength: number;
  /** The client asked to close the connection after this exchange. */
  readonly close: boolean;
  readonly rules: Omit<RequestHeaderRules, "upgrade">;
}

export interface AdmissionDeps {
  readonly store: Store;
  readonly config: ServerConfig;
  readonly cookieKey: Buffer;
}

const METHODS: ReadonlySet<string> = new Set(PROXY_METHODS);

/**
 * The plain case of `unitUrlRoutes` (api/unit-url/routes.ts), decided from a head read by
 * http/wire/head.ts: an HTTP/1.1 request in origin form for a unit host, no upgrade, no
 * `Expect`, no transfer coding, and a credential that admits it (or a public unit). Anything else
 * is undefined: the request goes to the API's own path, which answers every other case (logins,
 * 401s, 404s, websockets, chunked uploads, malformed requests) as it always did.
 */
export async function admit(head: RequestHead, deps: AdmissionDeps): Promise<Admitted | undefined> {
  const raw = head.rawHeaders;
  if (head.minorVersion !== 1 || !METHODS.has(head.method)) return undefined;
  if (!head.target.startsWith("/") || head.target.startsWith(RESERVED_PREFIX)) return undefined;
  const hosts = fieldValues(raw, "host");
  if (hosts.length !== 1) return undefined;
  const host = hosts[0] as string;
  const label = unitLabel(host, deps.config.unitHost);
  if (!label) return undefined;
  const connection = fieldValues(raw, "connection");
  if (listsToken(connection, "upgrade")) return undefined;
  if (fieldValues(raw, "upgrade").length > 0 || fieldValues(raw, "expect").length > 0) return undefined;
  if (fieldValues(raw, "transfer-encoding").length > 0) return undefined;
  let bodyLength: number | undefined;
  try {
    bodyLength = contentLength(raw);
  } catch (err) {
    if (err instanceof HeadError) return undefined;
    throw err;
  }
  const authorization = fieldValues(raw, "authorization");
  const cookies = fieldValues(raw, "cookie");
  if (authorization.length > 1 || cookies.length > 1) return undefined;

  const unit = await deps.store.units.getByUrlLabel(label);
  if (!unit) return undefined;
  let org: OrgRecord | undefined;
  if (unit.urlAuth !== "public") {
    const bearer = umsBearer(authorization[0]);
    let hash = bearer && hashToken(bearer);
    if (!hash) {
      const cookie = readCookie(cookies[0], SESSION_COOKIE);
      hash = cookie ? verifySession(deps.cookieKey, cookie, unit.id)?.tokenHash : undefined;
    }
    const found = hash ? await deps.store.tokens.authenticate(hash) : undefined;
    if (!found || tokenExpired(found.token) || found.org.id !== unit.orgId) return undefined;
    if (unit.privateAccess === "admins" && found.token.role !== "admin") return undefined;
    org = found.org;
  } else {
    org = await deps.store.orgs.getById(unit.orgId);
    if (!org) return undefined;
  }
  return {
    unit,
    org,
    bodyLength: bodyLength ?? 0,
    close: listsToken(connection, "close"),
    rules: {
      dropAuthorization: (value) => umsBearer(value) !== undefined,
      dropCookies: [SESSION_COOKIE, CONSOLE_COOKIE],
      forwardedHost: host,
      forwardedProto: deps.config.unitUrlScheme,
    },
  };
}
