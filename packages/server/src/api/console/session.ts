import { randomBytes, timingSafeEqual } from "node:crypto";
import { Type } from "@sinclair/typebox";
import { ErrorBody, ErrorCode } from "@ums/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import { CONSOLE_COOKIE, consoleSessionId, newSessionId, sessionHash } from "../../auth/console.js";
import { hashToken, tokenExpired } from "../../auth/tokens.js";
import type { OrgRecord, TokenRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors } from "../schemas.js";

/**
 * Issue #14: the web console's session. A browser signs in with an API token once
 * (`POST /v1/console/session`) and gets the cookie `ums_console` (HttpOnly, SameSite=Strict,
 * host-only, Secure over TLS), which then authenticates the `/v1` API as the token would, except:
 *
 * - a state-changing call (any method but GET, HEAD, OPTIONS) needs `X-UMS-CSRF: <csrf>`, the
 *   session's own value, given at sign-in (403 otherwise);
 * - a websocket upgrade needs an `Origin` of this same host (403 otherwise), as does any request
 *   that names an Origin at all;
 * - routes marked `config: NO_CONSOLE_COOKIE` never take it: the proxy to a unit (a unit's page must
 *   never run on the console's origin with the console's session) and `/v1/mcp`.
 *
 * The store keeps the SHA-256 of the cookie, never the cookie; a session is the token's: revoking
 * the token ends it at the next request, and signing out deletes the row.
 */
export { CONSOLE_COOKIE };
export const CSRF_HEADER = "x-ums-csrf";
/** How long a console session lasts (never past its token's expiry); then the console asks for a token again. */
export const CONSOLE_SESSION_TTL_MS = 12 * 3600 * 1000;

export type ConsoleRouteMode = "sign-in" | "no-cookie";

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * `sign-in`: the route authenticates its caller itself (the bearer hook lets it through);
     * `no-cookie`: the console cookie is not a credential here (a bearer token must be sent).
     */
    console?: ConsoleRouteMode;
  }
}

/** Route config of the routes that never take the console cookie. */
export const NO_CONSOLE_COOKIE = { console: "no-cookie" } as const;

const READS = new Set(["GET", "HEAD", "OPTIONS"]);

export function consoleRouteMode(req: FastifyRequest): ConsoleRouteMode | undefined {
  return (req.routeOptions.config as { console?: ConsoleRouteMode } | undefined)?.console;
}

/** The console cookie's value in the request, if it has one (`""` for one that cannot be a session). */
export function consoleCookie(req: FastifyRequest): string | undefined {
  return consoleSessionId(req.headers.cookie);
}

/** True when the request names no Origin, or one of this very host (scheme aside: a TLS front may end TLS). */
function sameHostOrigin(req: FastifyRequest, required: boolean): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return !required;
  const host = req.headers.host?.toLowerCase();
  try {
    const u = new URL(origin);
    return (u.protocol === "http:" || u.protocol === "https:") && host !== undefined && u.host === host;
  } catch {
    return false;
  }
}

function forbidden(message: string): ApiError {
  return new ApiError(403, ErrorCode.Forbidden, message);
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface ConsoleAuth {
  readonly token: TokenRecord;
  readonly org: OrgRecord;
  readonly session: { readonly idHash: string; readonly csrf: string; readonly expiresAt: string };
}

/**
 * Authenticates a request by its console cookie (the caller found one and no Authorization
 * header): the session must exist, be unexpired and its token live; then the CSRF and Origin rules.
 */
export async function cookieAuth(store: Store, req: FastifyRequest, cookie: string): Promise<ConsoleAuth> {
  const found = cookie
    ? await store.consoleSessions.authenticate(sessionHash(cookie), new Date().toISOString())
    : undefined;
  if (!found) {
    throw new ApiError(
      401,
      ErrorCode.Unauthorized,
      "console session is not valid (signed out, expired, or its token revoked): sign in again",
    );
  }
  const isWebsocket = req.headers.upgrade?.toLowerCase() === "websocket";
  if (!sameHostOrigin(req, isWebsocket)) {
    throw forbidden(
      isWebsocket
        ? "a websocket opened with the console cookie needs an Origin of this host"
        : "the console cookie is accepted only from pages of this host (Origin)",
    );
  }
  if (!READS.has(req.method)) {
    const sent = req.headers[CSRF_HEADER];
    if (typeof sent !== "string" || !sameSecret(sent, found.session.csrf)) {
      throw forbidden(`a ${req.method} made with the console cookie needs header X-UMS-CSRF (the session's csrf)`);
    }
  }
  return { token: found.token, org: found.org, session: found.session };
}

const SignIn = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 256, description: "An API token of the organization" }) },
  { additionalProperties: false },
);

const ConsoleSession = Type.Object(
  {
    organization: Type.String({ description: "The organization's slug" }),
    csrf: Type.String({ description: "Send as X-UMS-CSRF on every state-changing call made with the cookie" }),
    role: Type.String({ description: "The role of the token signed in with (admin or member)" }),
    token_name: Type.String(),
    expires_at: Type.String({ format: "date-time", description: "When the session ends" }),
  },
  { title: "ConsoleSession" },
);

function present(auth: ConsoleAuth) {
  return {
    organization: auth.org.slug,
    csrf: auth.session.csrf,
    role: auth.token.role,
    token_name: auth.token.name,
    expires_at: auth.session.expiresAt,
  };
}

/**
 * `Set-Cookie` of the console session: host-only, HttpOnly, SameSite=Strict; Secure when the request
 * came over TLS, or the server is configured as reached over https (`--unit-url-scheme https`: a
 * TLS front that ends TLS before ums).
 */
function setCookie(
  reply: FastifyReply,
  req: FastifyRequest,
  value: string,
  maxAgeS: number,
  httpsFront: boolean,
): FastifyReply {
  const secure = req.protocol === "https" || httpsFront ? "; Secure" : "";
  return reply
    .header("set-cookie", `${CONSOLE_COOKIE}=${value}; Path=/; Max-Age=${maxAgeS}; HttpOnly; SameSite=Strict${secure}`)
    .header("cache-control", "no-store");
}

function sessionOf(req: FastifyRequest): ConsoleAuth {
  const auth = req.auth as Partial<ConsoleAuth>;
  if (!auth.session) {
    throw new ApiError(
      401,
      ErrorCode.Unauthorized,
      "no console session in this request: sign in with POST /v1/console/session",
    );
  }
  return auth as ConsoleAuth;
}

/** `/v1/console/session`: sign in, the session of a page reload, sign out. Registered behind the bearer hook. */
export function consoleSessionRoutes(app: ApiInstance, store: Store, opts: { httpsFront: boolean }): void {
  const tags = ["console"];
  app.post(
    "/v1/console/session",
    {
      config: { console: "sign-in" },
      schema: {
        tags,
        summary: "Sign in to the console with an API token: sets the ums_console cookie",
        description:
          "The cookie is HttpOnly, SameSite=Strict, Path=/ and Secure over TLS. With it the /v1 API works as with " +
          "the token, but state-changing calls need header X-UMS-CSRF with the csrf returned here, and " +
          "websockets an Origin of this host. Revoking the token ends the session.",
        security: [],
        body: SignIn,
        response: { 200: ConsoleSession, ...commonErrors, 403: ErrorBody },
      },
    },
    async (req, reply) => {
      if (!sameHostOrigin(req, false)) throw forbidden("sign in from a page of this host (Origin)");
      const found = await store.tokens.authenticate(hashToken(req.body.token.trim()));
      if (!found) throw new ApiError(401, ErrorCode.Unauthorized, "token is not valid (unknown or revoked)");
      const now = Date.now();
      const { expiresAt } = found.token;
      // Not assertNotExpired: the token comes in the body, not as a bearer credential, so the answer
      // names no WWW-Authenticate scheme (as for an unknown token above).
      if (tokenExpired(found.token, now)) {
        throw new ApiError(401, ErrorCode.TokenExpired, `token expired at ${expiresAt}; mint a new one`);
      }
      // A browser signing in again leaves its previous session behind: it ends here.
      const previous = consoleCookie(req);
      if (previous) await store.consoleSessions.delete(sessionHash(previous));
      const id = newSessionId();
      const until = Math.min(now + CONSOLE_SESSION_TTL_MS, expiresAt !== null ? Date.parse(expiresAt) : Infinity);
      const session = {
        idHash: sessionHash(id),
        orgId: found.org.id,
        tokenId: found.token.id,
        csrf: randomBytes(32).toString("base64url"),
        createdAt: new Date(now).toISOString(),
        expiresAt: new Date(until).toISOString(),
      };
      await store.consoleSessions.insert(session);
      const auth: ConsoleAuth = { ...found, session };
      // The audit log records the sign-in as this token's.
      req.auth = auth;
      const maxAge = Math.max(1, Math.floor((until - now) / 1000));
      return setCookie(reply, req, id, maxAge, opts.httpsFront).send(present(auth));
    },
  );
  app.get(
    "/v1/console/session",
    {
      schema: {
        tags,
        summary: "The console session of the cookie (a page reload): organization and csrf",
        response: { 200: ConsoleSession, ...commonErrors, 403: ErrorBody },
      },
    },
    async (req, reply) => reply.header("cache-control", "no-store").send(present(sessionOf(req))),
  );
  app.delete(
    "/v1/console/session",
    {
      schema: {
        tags,
        summary: "Sign out: the session is deleted (its cookie no longer works) and the cookie cleared",
        response: { 204: Type.Null(), ...commonErrors, 403: ErrorBody },
      },
    },
    async (req, reply) => {
      const auth = sessionOf(req);
      await store.consoleSessions.delete(auth.session.idHash);
      return setCookie(reply, req, "", 0, opts.httpsFront).code(204).send(null);
    },
  );
}
