import { ErrorCode } from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import { hashToken, parseBearer, tokenExpired } from "../auth/tokens.js";
import type { OrgRecord, TokenRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { consoleCookie, consoleRouteMode, cookieAuth } from "./console/session.js";
import { ApiError } from "./errors.js";
import { type RateLimit, TokenBuckets } from "./rate-limit/token-bucket.js";

export interface AuthContext {
  readonly token: TokenRecord;
  readonly org: OrgRecord;
  /** Issue #14: set when the request was authenticated by the console cookie instead of a bearer token. */
  readonly session?: { readonly idHash: string; readonly csrf: string; readonly expiresAt: string };
}

declare module "fastify" {
  interface FastifyRequest {
    auth: AuthContext;
  }
}

/** RFC 6750 §3: a 401 names the scheme in WWW-Authenticate. */
function unauthorized(message: string, error: "invalid_request" | "invalid_token"): ApiError {
  return new ApiError(401, ErrorCode.Unauthorized, message, undefined, {
    "www-authenticate": `Bearer realm="ums", error="${error}"`,
  });
}

const TOUCH_INTERVAL_MS = 60_000;

/** RFC 6585 §4: too many requests, and when to come back (RFC 9110 §10.2.3). */
function rateLimited(who: string, limit: RateLimit, retryAfterS: number): ApiError {
  return new ApiError(
    429,
    ErrorCode.RateLimited,
    `${who} sends more than ${Math.round(limit.perSecond * 100) / 100} requests a second (bursts up to ${limit.burst}); retry after ${retryAfterS} s`,
    undefined,
    { "retry-after": String(retryAfterS) },
  );
}

/**
 * A token past its `expires_at` is refused wherever a token is taken (API, unit URLs and their
 * sessions, control connections), with a code that says so.
 */
export function assertNotExpired(record: TokenRecord): void {
  if (tokenExpired(record)) {
    throw new ApiError(401, ErrorCode.TokenExpired, `token expired at ${record.expiresAt}; mint a new one`, undefined, {
      "www-authenticate": `Bearer realm="ums", error="invalid_token", error_description="token expired"`,
    });
  }
}

/** The API's bearer authentication: the fastify hook, and the same checks for the unit URL's fast path. */
export interface BearerAuth {
  /** The onRequest hook of every authenticated route. */
  readonly hook: (request: FastifyRequest) => Promise<void>;
  /**
   * For a request forwarded outside fastify (api/unit-url/fast-path.ts), in two steps so that a
   * request it does not forward is not counted twice: the context of an `Authorization` header
   * when the hook would take it (a live bearer token, not expired), without counting anything; then
   * `count`, which counts it against its rate limits and notes the token's use, as the hook does,
   * and says whether it is within them. Where either says no, the request takes the API's path,
   * which answers it.
   */
  lookup(header: string | undefined): Promise<AuthContext | undefined>;
  count(found: AuthContext, log: (err: unknown) => void): boolean;
}

/**
 * Spec section 5: every external request carries `Authorization: Bearer <token>`; the token's
 * organization scopes everything the request does. Issue #20 part 5: every authenticated request
 * (websocket upgrades too) is counted against its token's and its organization's rate limits.
 */
export function bearerAuth(store: Store, limits?: { token: RateLimit; org: RateLimit }): BearerAuth {
  const lastTouch = new Map<string, number>();
  const perToken = limits && new TokenBuckets(limits.token);
  const perOrg = limits && new TokenBuckets(limits.org);
  async function byBearer(request: FastifyRequest): Promise<AuthContext> {
    const header = request.headers.authorization;
    const token = parseBearer(header);
    if (!token) {
      throw unauthorized(
        header
          ? "Authorization header is not 'Bearer <token>'"
          : "missing bearer token: send 'Authorization: Bearer <token>'",
        "invalid_request",
      );
    }
    const found = await store.tokens.authenticate(hashToken(token));
    if (!found) throw unauthorized("token is not valid (unknown or revoked)", "invalid_token");
    return found;
  }

  /** The rate limits' wait for this request (0: counted and allowed). */
  function limited(found: AuthContext): ApiError | undefined {
    if (!perToken || !perOrg) return undefined;
    const tokenWait = perToken.take(found.token.id);
    if (tokenWait > 0) return rateLimited("this token", perToken.limit, tokenWait);
    const orgWait = perOrg.take(found.org.id);
    if (orgWait > 0) return rateLimited(`organization '${found.org.slug}'`, perOrg.limit, orgWait);
    return undefined;
  }

  function touch(record: TokenRecord, log: (err: unknown) => void): void {
    const now = Date.now();
    if (now - (lastTouch.get(record.id) ?? 0) <= TOUCH_INTERVAL_MS) return;
    lastTouch.set(record.id, now);
    store.tokens.touch(record.id, new Date(now).toISOString()).catch(log);
  }

  return {
    async hook(request: FastifyRequest): Promise<void> {
      const mode = consoleRouteMode(request);
      // The console's sign-in checks the token it is given itself.
      if (mode === "sign-in") return;
      // Issue #14: a browser's console session, where no Authorization header is sent.
      const cookie = request.headers.authorization === undefined && mode !== "no-cookie" && consoleCookie(request);
      const found = typeof cookie === "string" ? await cookieAuth(store, request, cookie) : await byBearer(request);
      assertNotExpired(found.token);
      const refused = limited(found);
      if (refused) throw refused;
      request.auth = found;
      touch(found.token, (err) => request.log.warn({ err }, "token touch failed"));
    },
    async lookup(header: string | undefined): Promise<AuthContext | undefined> {
      const token = parseBearer(header);
      if (!token) return undefined;
      const found = await store.tokens.authenticate(hashToken(token));
      return found && !tokenExpired(found.token) ? found : undefined;
    },
    count(found: AuthContext, log: (err: unknown) => void): boolean {
      if (limited(found)) return false;
      touch(found.token, log);
      return true;
    },
  };
}
