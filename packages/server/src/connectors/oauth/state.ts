import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * The OAuth `state` (RFC 6749 §10.12, CSRF protection): a signed, expiring value bound to the
 * organization, the provider and the redirect URI, so a callback can only complete the
 * authorization its organization started. `<payload b64url>.<HMAC-SHA256 b64url>`.
 */
export interface StatePayload {
  /** Organization id. */
  readonly o: string;
  /** Provider key. */
  readonly p: string;
  readonly redirectUri: string;
  /** Scopes asked for (comma-separated). */
  readonly scopes: string;
  /** A connector to add the scopes to (add_scopes), if any. */
  readonly conn?: string;
  /** The caller's own state value, if it gave one. */
  readonly client?: string;
  /** Expiry, Unix ms. */
  readonly exp: number;
  readonly n: string;
}

export const STATE_TTL_MS = 10 * 60 * 1000;

export function signState(key: Buffer, p: Omit<StatePayload, "exp" | "n">, now = Date.now()): string {
  const payload: StatePayload = { ...p, exp: now + STATE_TTL_MS, n: randomBytes(9).toString("base64url") };
  const body = Buffer.from(JSON.stringify(payload)).toString("base64url");
  return `${body}.${createHmac("sha256", key).update(body).digest("base64url")}`;
}

/** The payload, or a reason the state is not acceptable (never says more than that). */
export function verifyState(key: Buffer, state: string, now = Date.now()): StatePayload | string {
  const [body, mac, extra] = state.split(".");
  if (!body || !mac || extra !== undefined) return "state is not one this server issued";
  const want = createHmac("sha256", key).update(body).digest();
  const got = Buffer.from(mac, "base64url");
  if (got.length !== want.length || !timingSafeEqual(got, want)) return "state is not one this server issued";
  let p: StatePayload;
  try {
    p = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    return "state is not one this server issued";
  }
  if (typeof p.exp !== "number" || p.exp < now) return "state has expired; start again with authorize";
  return p;
}

/** The state key: an HMAC of a label under the master key (a PRF), never the master key itself. */
export function stateKey(masterKey: Buffer): Buffer {
  return createHmac("sha256", masterKey).update("ums oauth state v1").digest();
}
