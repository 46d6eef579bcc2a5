import { createHash, randomBytes } from "node:crypto";

/**
 * The OAuth `state` (RFC 6749 §4.1.1, §10.12 CSRF protection), spec 4.8: the caller's own value goes
 * into the authorization URL exactly as given; one is generated only when the caller gave none. The
 * organization, provider, redirect URI and scopes of the authorization stay on the server (the store's
 * `oauth_states`), keyed by the state's SHA-256, so a callback finds its organization by the state and
 * a state completes one authorization only.
 */
export const STATE_TTL_MS = 10 * 60 * 1000;

/** A generated state: 256 random bits, base64url (43 characters, within the caller-state rule). */
export function newState(): string {
  return randomBytes(32).toString("base64url");
}

/** What the store keeps instead of the state itself. */
export function stateHash(state: string): string {
  return createHash("sha256").update(state, "utf8").digest("hex");
}
