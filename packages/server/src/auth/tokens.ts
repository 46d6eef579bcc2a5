import { createHash, randomBytes } from "node:crypto";
import type { TokenRecord, TokenRole } from "../store/records.js";
import type { TokenStore } from "../store/store.js";

const TOKEN_PREFIX = "ums_";
const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Random characters from `alphabet`, unbiased (rejection sampling). */
export function randomString(length: number, alphabet = ALPHABET): string {
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < limit) out += alphabet[b % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** A new API token: `ums_` + 43 base62 characters (256 bits of entropy). */
export function generateToken(): string {
  return TOKEN_PREFIX + randomString(43);
}

/**
 * Tokens carry 256 random bits, so a plain SHA-256 is a safe one-way hash for storage
 * (no password stretching needed) and keeps lookup a single indexed equality.
 */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** RFC 6750 §2.1: `Authorization: Bearer <b64token>`. Returns the token or undefined. */
export function parseBearer(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)[ ]*$/i.exec(header);
  return m?.[1];
}

/** Whether a token is past its `expires_at` at `now` (a token without one never expires). */
export function tokenExpired(record: Pick<TokenRecord, "expiresAt">, now = Date.now()): boolean {
  return record.expiresAt !== null && Date.parse(record.expiresAt) <= now;
}

export function newTokenId(): string {
  return `tok_${randomString(16, "0123456789abcdefghijklmnopqrstuvwxyz")}`;
}

/**
 * Mints a token of organization `orgId`: a new secret, of which only the hash is stored. Returns the
 * stored record and the secret, which its caller shows once (the CLI, the token routes, the
 * `sprites_admin` connector).
 */
export async function mintToken(
  tokens: Pick<TokenStore, "create">,
  token: { orgId: string; name: string; role: TokenRole; expiresAt?: string | null },
): Promise<{ secret: string; record: TokenRecord }> {
  const secret = generateToken();
  const record = await tokens.create({
    id: newTokenId(),
    ...token,
    hash: hashToken(secret),
    createdAt: new Date().toISOString(),
  });
  return { secret, record };
}
