import { ErrorCode } from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import { hashToken, parseBearer } from "../auth/tokens.js";
import type { OrgRecord, TokenRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { ApiError } from "./errors.js";

export interface AuthContext {
  readonly token: TokenRecord;
  readonly org: OrgRecord;
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

/**
 * Spec section 5: every external request carries `Authorization: Bearer <token>`; the token's
 * organization scopes everything the request does.
 */
export function bearerAuth(store: Store) {
  const lastTouch = new Map<string, number>();
  return async function authenticate(request: FastifyRequest): Promise<void> {
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
    const record = found.token;
    request.auth = found;
    const now = Date.now();
    if (now - (lastTouch.get(record.id) ?? 0) > TOUCH_INTERVAL_MS) {
      lastTouch.set(record.id, now);
      store.tokens
        .touch(record.id, new Date(now).toISOString())
        .catch((err) => request.log.warn({ err }, "token touch failed"));
    }
  };
}
