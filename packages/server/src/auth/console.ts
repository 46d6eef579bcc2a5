import { createHash, randomBytes } from "node:crypto";

/** Issue #14: the console session's cookie (api/console/session.ts). */
export const CONSOLE_COOKIE = "ums_console";

/** A session id as `newSessionId` makes it (32 random bytes, base64url). */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

/** A new console session id (the cookie's value): 256 random bits. */
export function newSessionId(): string {
  return randomBytes(32).toString("base64url");
}

/** What the store keeps instead of the session id (256 random bits: a plain SHA-256 is one-way enough). */
export function sessionHash(id: string): string {
  return createHash("sha256").update(id, "utf8").digest("hex");
}

/**
 * The console cookie of a `Cookie` header: `undefined` when there is none, `""` when there is one
 * that cannot be a session id (so that it is refused, never looked up).
 */
export function consoleSessionId(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === CONSOLE_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return SESSION_ID.test(value) ? value : "";
    }
  }
  return undefined;
}
