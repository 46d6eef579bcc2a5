import type { OAuthClient } from "../registry/registry.js";

/** What a token endpoint gave (RFC 6749 §5.1), plus the account fields some providers add. */
export interface TokenSet {
  readonly accessToken: string;
  readonly refreshToken?: string;
  /** Absolute expiry (ISO), when the provider gave `expires_in`. */
  readonly expiresAt?: string;
  /** Granted scopes, comma-separated. */
  readonly scopes?: string;
  readonly accountId?: string;
  readonly accountName?: string;
}

export class TokenEndpointError extends Error {}

function pick(o: Record<string, unknown>, ...paths: string[]): string | undefined {
  for (const path of paths) {
    let v: unknown = o;
    for (const k of path.split(".")) v = v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined;
    if (typeof v === "string" && v) return v;
    if (typeof v === "number") return String(v);
  }
  return undefined;
}

/**
 * POSTs to the token endpoint (RFC 6749 §4.1.3 code exchange, §6 refresh) with the client
 * credentials in the body (client_secret_post, §2.3.1). Errors name the provider's `error` code
 * only; never a token, code or secret.
 */
export async function requestToken(
  client: OAuthClient,
  params: Record<string, string>,
  timeoutMs = 15_000,
): Promise<TokenSet> {
  const body = new URLSearchParams({ ...params, client_id: client.clientId, client_secret: client.clientSecret });
  let res: Response;
  try {
    res = await fetch(client.tokenUrl, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch {
    throw new TokenEndpointError("the provider's token endpoint could not be reached");
  }
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {
    // Some providers answer form-encoded (RFC 6749 predates JSON-only).
    json = Object.fromEntries(new URLSearchParams(text));
  }
  const accessToken = pick(json, "access_token", "authed_user.access_token");
  if (!res.ok || !accessToken) {
    const code =
      typeof json.error === "string" ? json.error.replace(/[^\w.-]/g, "").slice(0, 64) : `HTTP ${res.status}`;
    throw new TokenEndpointError(`the provider's token endpoint refused the request (${code})`);
  }
  const expiresIn = Number(json.expires_in);
  const scope = typeof json.scope === "string" ? json.scope : undefined;
  const refreshToken = pick(json, "refresh_token");
  const accountId = pick(json, "account_id", "user_id", "team.id", "workspace_id", "id_token_sub");
  const accountName = pick(json, "account_name", "team.name", "workspace_name");
  return {
    accessToken,
    ...(refreshToken && { refreshToken }),
    ...(Number.isFinite(expiresIn) &&
      expiresIn > 0 && { expiresAt: new Date(Date.now() + expiresIn * 1000).toISOString() }),
    ...(scope !== undefined && {
      scopes: scope
        .split(/[\s,]+/)
        .filter(Boolean)
        .join(","),
    }),
    ...(accountId && { accountId }),
    ...(accountName && { accountName }),
  };
}
