import type { IncomingMessage } from "node:http";
import { ErrorCode } from "@ums/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import { hashToken, parseBearer } from "../../auth/tokens.js";
import type { ServerConfig } from "../../config.js";
import type { OrgRecord, TokenRecord, UnitRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { assertNotExpired } from "../auth.js";
import { CONSOLE_COOKIE } from "../console/session.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { type ProxyDeps, proxyToUnit } from "../proxy/forward.js";
import type { RequestHeaderRules } from "../proxy/headers.js";
import { PROXY_METHODS } from "../proxy/routes.js";
import { readCookie, SESSION_COOKIE, SESSION_TTL_S, sessionCookie, signSession, verifySession } from "./cookie.js";
import { loginPage } from "./login-page.js";

/**
 * Requests for a unit URL are routed here by `rewriteUnitHost` (fastify's `rewriteUrl`, which runs
 * before routing), so that no /v1 route is ever reachable under a unit's host name.
 */
export const UNIT_URL_ROUTE = "/.ums/unit-url";
/** Paths under this prefix on a unit URL are ums's own (the login flow); the unit never sees them. */
export const RESERVED_PREFIX = "/.ums/";

const LABEL = Symbol("ums.unitUrlLabel");
const DNS_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** The unit label of a Host header under `unitHost` ("" for a malformed one), undefined for other hosts. */
export function unitLabel(host: string | undefined, unitHost: string): string | undefined {
  if (!host) return undefined;
  const name = host.toLowerCase().replace(/:\d*$/, "").replace(/\.$/, "");
  if (!name.endsWith(`.${unitHost}`)) return undefined;
  const label = name.slice(0, -(unitHost.length + 1));
  return DNS_LABEL.test(label) ? label : "";
}

/** For fastify's `rewriteUrl`: a request for `<label>.<unitHost>` goes to the unit URL route (else undefined). */
export function rewriteUnitHost(unitHost: string) {
  return (req: IncomingMessage): string | undefined => {
    const label = unitLabel(req.headers.host, unitHost);
    if (label === undefined) return undefined;
    (req as unknown as Record<symbol, string>)[LABEL] = label;
    return UNIT_URL_ROUTE;
  };
}

export interface UnitUrlDeps extends ProxyDeps {
  readonly store: Store;
  readonly config: ServerConfig;
  readonly cookieKey: Buffer;
}

interface Credential {
  readonly token: TokenRecord;
  readonly org: OrgRecord;
  readonly tokenHash: string;
}

/** The target path of a request as the client sent it (origin form; absolute form reduced to it). */
function originalPath(req: FastifyRequest): string {
  const url = req.originalUrl;
  if (url.startsWith("/")) return url;
  try {
    const u = new URL(url);
    return `${u.pathname}${u.search}`;
  } catch {
    return "/";
  }
}

/** Only a path of this host may follow a login (no open redirect to another site). */
function safeNext(next: unknown): string {
  return typeof next === "string" && next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\")
    ? next
    : "/";
}

const isBrowser = (req: FastifyRequest) =>
  (req.method === "GET" || req.method === "HEAD") && /\btext\/html\b/i.test(req.headers.accept ?? "");

/** A ums token in `Authorization` (ours to check and to strip), told apart from an app's own credentials. */
function umsBearer(value: string | undefined): string | undefined {
  const token = parseBearer(value);
  return token?.startsWith("ums_") ? token : undefined;
}

/**
 * The token a request for a unit's URL offers (a ums bearer token first, then the login's session
 * cookie for this unit): the hash to look up, and whether it came as a bearer token (an unknown one
 * is then answered 401). The API's path below and the fast path (fast-admission.ts) take the same.
 */
export function offeredToken(
  authorization: string | undefined,
  cookie: string | undefined,
  cookieKey: Buffer,
  unitId: string,
): { readonly hash: string; readonly bearer: boolean } | undefined {
  const bearer = umsBearer(authorization);
  if (bearer) return { hash: hashToken(bearer), bearer: true };
  const value = readCookie(cookie, SESSION_COOKIE);
  const session = value ? verifySession(cookieKey, value, unitId) : undefined;
  return session && { hash: session.tokenHash, bearer: false };
}

/**
 * Why a live token may not reach the unit as its `url_settings` are now: another organization's
 * (which learns nothing of the unit), or a member's where `private_access` asks for an admin's.
 */
export function unitUrlRefusal(
  found: { readonly token: TokenRecord; readonly org: OrgRecord },
  unit: UnitRecord,
): "foreign" | "admins-only" | undefined {
  if (found.org.id !== unit.orgId) return "foreign";
  if (unit.privateAccess === "admins" && found.token.role !== "admin") return "admins-only";
  return undefined;
}

/** What a request for a unit's URL carries to the unit: never its ums token or our cookies. */
export function unitUrlHeaderRules(host: string, scheme: "http" | "https"): Omit<RequestHeaderRules, "upgrade"> {
  return {
    dropAuthorization: (value) => umsBearer(value) !== undefined,
    dropCookies: [SESSION_COOKIE, CONSOLE_COOKIE],
    forwardedHost: host,
    forwardedProto: scheme,
  };
}

async function readForm(req: IncomingMessage, limit = 8192): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new ApiError(413, ErrorCode.PayloadTooLarge, "login form is too large");
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

/**
 * Spec 5 and docs/ARCHITECTURE.md section 10: a unit's own URL. `url_settings.auth = public` lets anyone in;
 * `unit` asks for a token of the unit's organization (`private_access: admins` narrows it to admin
 * tokens), as `Authorization: Bearer` or as the session cookie of the login flow:
 *
 *   browser GET (Accept: text/html) without credentials → 302 /.ums/login?next=<path>
 *   GET  /.ums/login   → a small form asking for a token (nothing leaves the unit host)
 *   POST /.ums/login   → token checked once (org, role) → 303 <next>, Set-Cookie ums_unit_session
 *                        (HMAC-signed {token hash, unit id, expiry}; HttpOnly, SameSite=Lax, host-only)
 *   GET  /.ums/logout  → cookie cleared
 *
 * The settings are read from the store on every request, so a change applies to the next one; a
 * revoked token ends its sessions at once. Neither the ums token nor the cookie reaches the unit.
 */
export function unitUrlRoutes(app: ApiInstance, deps: UnitUrlDeps): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_req, _payload, done) => done(null));
  const secure = deps.config.unitUrlScheme === "https";

  /** The live token of that hash; one past its expiry is refused (401 UMS_TOKEN_EXPIRED). */
  async function authenticate(hash: string): Promise<Credential | undefined> {
    const found = await deps.store.tokens.authenticate(hash);
    if (found) assertNotExpired(found.token);
    return found && { ...found, tokenHash: hash };
  }

  /** The credential of the request (bearer first, then the session cookie), if any. */
  async function credential(req: FastifyRequest, unit: UnitRecord): Promise<Credential | undefined> {
    const offered = offeredToken(req.headers.authorization, req.headers.cookie, deps.cookieKey, unit.id);
    const found = offered && (await authenticate(offered.hash));
    if (!found && offered?.bearer) {
      throw new ApiError(401, ErrorCode.Unauthorized, "token is not valid (unknown or revoked)", undefined, {
        "www-authenticate": 'Bearer realm="ums", error="invalid_token"',
      });
    }
    return found;
  }

  /** `private_access` as it is now: the org's tokens, or only its admin tokens. */
  function admit(cred: Credential, unit: UnitRecord, host: string): void {
    const refusal = unitUrlRefusal(cred, unit);
    // Another organization's token learns nothing about this unit.
    if (refusal === "foreign") throw new ApiError(404, ErrorCode.UnitNotFound, `no unit at ${host}`);
    if (refusal === "admins-only") {
      throw new ApiError(
        403,
        ErrorCode.Forbidden,
        `only admin tokens of organization '${cred.org.slug}' may reach ${host}`,
      );
    }
  }

  async function login(req: FastifyRequest, reply: FastifyReply, unit: UnitRecord, host: string, path: string) {
    const url = new URL(path, "http://unit");
    const page = (status: number, next: string, message?: string) =>
      reply
        .code(status)
        .headers({
          "cache-control": "no-store",
          "content-security-policy":
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
          "referrer-policy": "no-referrer",
          "x-content-type-options": "nosniff",
        })
        .type("text/html; charset=utf-8")
        .send(req.method === "HEAD" ? undefined : loginPage({ host, next, message }));
    if (url.pathname === "/.ums/logout" && (req.method === "GET" || req.method === "POST")) {
      return reply
        .code(303)
        .header("set-cookie", sessionCookie("", secure, 0))
        .header("location", "/.ums/login")
        .header("cache-control", "no-store")
        .send();
    }
    if (url.pathname !== "/.ums/login") {
      throw new ApiError(
        404,
        ErrorCode.RouteNotFound,
        `no route ${req.method} ${url.pathname} (paths under /.ums/ are reserved)`,
      );
    }
    if (req.method === "GET" || req.method === "HEAD") return page(200, safeNext(url.searchParams.get("next")));
    if (req.method !== "POST") {
      throw new ApiError(405, ErrorCode.MethodNotAllowed, "use GET or POST on /.ums/login");
    }
    const form = await readForm(req.raw);
    const next = safeNext(form.get("next"));
    const token = form.get("token")?.trim() ?? "";
    let cred: Credential | undefined;
    try {
      cred = token ? await authenticate(hashToken(token)) : undefined;
    } catch (err) {
      if (!(err instanceof ApiError && err.code === ErrorCode.TokenExpired)) throw err;
      return page(401, next, "That token has expired: mint a new one.");
    }
    const refusal = cred && unitUrlRefusal(cred, unit);
    if (!cred || refusal === "foreign") return page(401, next, "That token is not valid for this unit.");
    if (refusal === "admins-only") return page(403, next, "Only admin tokens may open this unit.");
    const exp = Math.floor(Date.now() / 1000) + SESSION_TTL_S;
    return reply
      .code(303)
      .header(
        "set-cookie",
        sessionCookie(signSession(deps.cookieKey, { tokenHash: cred.tokenHash, unitId: unit.id, exp }), secure),
      )
      .header("location", next)
      .header("cache-control", "no-store")
      .send();
  }

  const handle = async (req: FastifyRequest, reply: FastifyReply) => {
    const label = (req.raw as unknown as Record<symbol, string | undefined>)[LABEL];
    // Reached without a unit host: this path is nobody's route.
    if (label === undefined) throw new ApiError(404, ErrorCode.RouteNotFound, `no route ${req.method} ${req.url}`);
    const host = req.headers.host ?? "";
    const unit = label ? await deps.store.units.getByUrlLabel(label) : undefined;
    if (!unit) throw new ApiError(404, ErrorCode.UnitNotFound, `no unit at ${host}`);
    const path = originalPath(req);
    if (path.startsWith(RESERVED_PREFIX)) return login(req, reply, unit, host, path);

    let org: OrgRecord | undefined;
    if (unit.urlAuth !== "public") {
      const cred = await credential(req, unit);
      if (!cred) {
        if (isBrowser(req)) {
          return reply
            .code(302)
            .header("location", `/.ums/login?next=${encodeURIComponent(path)}`)
            .header("cache-control", "no-store")
            .send();
        }
        throw new ApiError(
          401,
          ErrorCode.Unauthorized,
          `${host} requires a token of the unit's organization: send 'Authorization: Bearer <token>' (browsers: log in at /.ums/login)`,
          undefined,
          { "www-authenticate": 'Bearer realm="ums", error="invalid_request"' },
        );
      }
      admit(cred, unit, host);
      org = cred.org;
    }
    org ??= await deps.store.orgs.getById(unit.orgId);
    if (!org) throw new ApiError(404, ErrorCode.UnitNotFound, `no unit at ${host}`);
    await proxyToUnit(deps, req, reply, {
      org,
      unit,
      path,
      headers: unitUrlHeaderRules(host, deps.config.unitUrlScheme),
    });
  };

  app.route({
    method: [...PROXY_METHODS],
    url: UNIT_URL_ROUTE,
    schema: { hide: true },
    preHandler: handle,
    handler: async () => {
      throw new Error("unit URL handler reached without an answer");
    },
  });
}
