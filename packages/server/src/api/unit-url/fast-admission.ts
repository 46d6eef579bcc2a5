import { unitNameProblem } from "@ums/protocol";
import { tokenExpired } from "../../auth/tokens.js";
import type { ServerConfig } from "../../config.js";
import { contentLength, fieldValues, HeadError, listsToken, type RequestHead } from "../../http/wire/head.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import type { BearerAuth } from "../auth.js";
import type { RequestHeaderRules } from "../proxy/headers.js";
import { apiProxyHeaderRules, PROXY_METHODS, unitPath, unitRootUrl } from "../proxy/routes.js";
import {
  offeredToken,
  RESERVED_PREFIX,
  UNIT_URL_ROUTE,
  unitLabel,
  unitUrlHeaderRules,
  unitUrlRefusal,
} from "./routes.js";

/** A request the fast path forwards itself: every check of the API's own path for it passed. */
export interface Admitted {
  readonly unit: UnitRecord;
  readonly org: OrgRecord;
  /** The target the unit is sent (origin form). */
  readonly path: string;
  /** The route's pattern, for the request metrics (never the URL: no unit name in a label). */
  readonly route: string;
  /** Bytes of body that follow the head (Content-Length; 0 without one). */
  readonly bodyLength: number;
  /** The client asked to close the connection after this exchange. */
  readonly close: boolean;
  readonly rules: Omit<RequestHeaderRules, "upgrade">;
}

/** What the `/v1/units/{name}/<path>` proxy needs, given once the API's routes exist (app.ts). */
export interface ApiProxyAdmission {
  readonly auth: BearerAuth;
  /** Whether fastify routes `method path` (a path without its query) to the proxy route. */
  readonly isProxyRoute: (method: string, path: string) => boolean;
  readonly log: (err: unknown) => void;
}

export interface AdmissionDeps {
  readonly store: Store;
  readonly config: ServerConfig;
  readonly cookieKey: Buffer;
}

/** The request as far as every fast-path request must be. */
interface Plain {
  readonly host: string;
  readonly bodyLength: number;
  readonly close: boolean;
  readonly authorization: string | undefined;
  readonly cookie: string | undefined;
}

const METHODS: ReadonlySet<string> = new Set(PROXY_METHODS);
/** Reads through the /v1 proxy: the audit log records every other method (api/audit/recorder.ts). */
const READS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS"]);
const API_PROXY = /^\/v1\/(units|sprites)\/([^/?#]+)\//;

/**
 * HTTP/1.1, a method the proxy forwards, an origin-form target, one Host, no upgrade, no
 * `Expect`, no transfer coding, a Content-Length of digits, at most one Authorization and Cookie.
 */
function plain(head: RequestHead): Plain | undefined {
  const raw = head.rawHeaders;
  if (head.minorVersion !== 1 || !METHODS.has(head.method) || !head.target.startsWith("/")) return undefined;
  const hosts = fieldValues(raw, "host");
  if (hosts.length !== 1) return undefined;
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
  return {
    host: hosts[0] as string,
    bodyLength: bodyLength ?? 0,
    close: listsToken(connection, "close"),
    authorization: authorization[0],
    cookie: cookies[0],
  };
}

/**
 * The plain cases of the two ways to a unit's HTTP target, decided from a head read by
 * http/wire/head.ts: a unit's URL (`unitUrlRoutes`, api/unit-url/routes.ts) and reads through
 * `/v1/units/{name}/<path>` (`proxyRoutes`, api/proxy/routes.ts, once `api` is given). Anything else
 * is undefined: the request goes to the API's own path, which answers every other case (logins,
 * 401s, 404s, 429s, websockets, chunked uploads, malformed requests) as it always did.
 */
export async function admit(
  head: RequestHead,
  deps: AdmissionDeps,
  api: ApiProxyAdmission | undefined,
): Promise<Admitted | undefined> {
  const req = plain(head);
  if (!req) return undefined;
  const label = unitLabel(req.host, deps.config.unitHost);
  if (label !== undefined) return label ? unitUrl(head, req, label, deps) : undefined;
  return api ? apiProxy(head, req, deps, api) : undefined;
}

/** Spec 5: the unit URL, for a credential its `url_settings` let in (read on every request). */
async function unitUrl(head: RequestHead, req: Plain, label: string, deps: AdmissionDeps) {
  if (head.target.startsWith(RESERVED_PREFIX)) return undefined;
  const unit = await deps.store.units.getByUrlLabel(label);
  if (!unit) return undefined;
  let org: OrgRecord | undefined;
  if (unit.urlAuth !== "public") {
    const offered = offeredToken(req.authorization, req.cookie, deps.cookieKey, unit.id);
    const found = offered && (await deps.store.tokens.authenticate(offered.hash));
    if (!found || tokenExpired(found.token) || unitUrlRefusal(found, unit)) return undefined;
    org = found.org;
  } else {
    org = await deps.store.orgs.getById(unit.orgId);
    if (!org) return undefined;
  }
  return {
    unit,
    org,
    path: head.target,
    route: UNIT_URL_ROUTE,
    bodyLength: req.bodyLength,
    close: req.close,
    rules: unitUrlHeaderRules(req.host, deps.config.unitUrlScheme),
  };
}

/** Spec 4.1: a read through `/v1/units/{name}/<path>` with a bearer token of the unit's organization. */
async function apiProxy(head: RequestHead, req: Plain, deps: AdmissionDeps, api: ApiProxyAdmission) {
  if (!READS.has(head.method)) return undefined;
  const m = API_PROXY.exec(head.target);
  const name = m?.[2];
  if (!m || !name || unitNameProblem(name)) return undefined;
  const routed = unitRootUrl(head.target);
  const query = routed.indexOf("?");
  if (!api.isProxyRoute(head.method, query < 0 ? routed : routed.slice(0, query))) return undefined;
  const found = await api.auth.lookup(req.authorization);
  if (!found) return undefined;
  const unit = await deps.store.units.get(found.org.id, name);
  if (!unit || !api.auth.count(found, api.log)) return undefined;
  return {
    unit,
    org: found.org,
    path: unitPath(head.target),
    route: `/v1/${m[1]}/:name/*`,
    bodyLength: req.bodyLength,
    close: req.close,
    rules: apiProxyHeaderRules(req.host, deps.config.unitUrlScheme),
  };
}
