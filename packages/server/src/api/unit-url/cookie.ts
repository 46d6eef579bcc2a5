import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The cookie that a login on a unit URL sets (host-only: it goes to that unit host and no other). */
export const SESSION_COOKIE = "ums_unit_session";
/** A browser session on a unit URL lasts this long; then the login page asks for a token again. */
export const SESSION_TTL_S = 24 * 3600;

/**
 * The key that signs unit URL session cookies: 32 random bytes in `<dataDir>/cookie.key`, made 0600
 * on first start. Deleting the file logs every browser out at the next start.
 */
export function loadCookieKey(dataDir: string): Buffer {
  const path = join(dataDir, "cookie.key");
  for (let attempt = 0; ; attempt++) {
    try {
      const key = readFileSync(path);
      if (key.length < 32)
        throw new Error(`${path} holds ${key.length} bytes; a cookie key needs 32 (delete the file)`);
      return key;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || attempt > 0) throw err;
    }
    try {
      writeFileSync(path, randomBytes(32), { mode: 0o600, flag: "wx" });
    } catch (err) {
      // Another server on the same data dir made it first: read theirs.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
}

/** What a session cookie says: which token logged in to which unit, until when. */
export interface UnitSession {
  /** SHA-256 of the token (as stored), so that a revoked token ends its sessions at once. */
  readonly tokenHash: string;
  readonly unitId: string;
  /** Expiry, seconds since the epoch. */
  readonly exp: number;
}

const b64 = (b: Buffer | string) => Buffer.from(b).toString("base64url");

function mac(key: Buffer, payload: string): Buffer {
  return createHmac("sha256", key).update(`ums-unit-session.${payload}`).digest();
}

export function signSession(key: Buffer, session: UnitSession): string {
  const payload = b64(JSON.stringify({ h: session.tokenHash, u: session.unitId, e: session.exp }));
  return `v1.${payload}.${b64(mac(key, payload))}`;
}

/** The session of a cookie value, if its signature holds, it is for `unitId` and not expired. */
export function verifySession(
  key: Buffer,
  value: string,
  unitId: string,
  now = Date.now() / 1000,
): UnitSession | undefined {
  const [version, payload, sig] = value.split(".");
  if (version !== "v1" || !payload || !sig) return undefined;
  const expected = mac(key, payload);
  const got = Buffer.from(sig, "base64url");
  if (got.length !== expected.length || !timingSafeEqual(got, expected)) return undefined;
  try {
    const s = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as {
      h?: unknown;
      u?: unknown;
      e?: unknown;
    };
    if (typeof s.h !== "string" || typeof s.u !== "string" || typeof s.e !== "number") return undefined;
    if (s.u !== unitId || s.e <= now) return undefined;
    return { tokenHash: s.h, unitId: s.u, exp: s.e };
  } catch {
    return undefined;
  }
}

/** The value of one cookie in a `Cookie` header. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** `Set-Cookie` for a session: host-only, HttpOnly, SameSite=Lax, Secure behind https. */
export function sessionCookie(value: string, secure: boolean, maxAge = SESSION_TTL_S): string {
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}`;
}
