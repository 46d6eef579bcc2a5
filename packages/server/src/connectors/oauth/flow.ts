import type { AccessPolicy, AuthorizeQuery } from "@ums/protocol";
import { ErrorCode } from "@ums/protocol";
import { ApiError } from "../../errors/api-error.js";
import type { ConnectorRecord, OAuthStateRecord, OrgRecord } from "../../store/records.js";
import type { OAuthClient, ResolvedProvider } from "../registry/registry.js";
import type { ConnectorService } from "../service/service.js";
import { newState, STATE_TTL_MS, stateHash } from "./state.js";
import { requestToken, TokenEndpointError } from "./token.js";

const splitScopes = (s: string | undefined) => (s ?? "").split(/[\s,]+/).filter(Boolean);

function httpUrl(raw: string, field: string): string {
  try {
    const u = new URL(raw);
    if (u.protocol === "http:" || u.protocol === "https:") return u.href;
  } catch {}
  throw ApiError.validation([`${field}: must be an absolute http(s) URL`]);
}

/** Spec 4.8 authorize and callback (RFC 6749 §4.1, authorization code grant). */
export class OAuthFlow {
  constructor(private readonly connectors: ConnectorService) {}

  client(provider: string): { p: ResolvedProvider; client: OAuthClient } {
    const p = this.connectors.provider(provider, 404);
    if (!p.oauth) {
      throw ApiError.validation([`provider: '${p.key}' does not use OAuth; create the connector with api_key`]);
    }
    if (!p.client) {
      throw ApiError.validation([
        `provider: this server has no OAuth client for '${p.key}' (connectors config providers.${p.key}.clientId and clientSecret)`,
      ]);
    }
    return { p, client: p.client };
  }

  /**
   * `sessionHash`: the console session that asks (issue #14), if one does; its browser alone may then
   * complete the flow at the GET callback.
   */
  async authorize(
    org: OrgRecord,
    provider: string,
    q: AuthorizeQuery,
    defaultRedirect: string,
    sessionHash?: string | undefined,
  ) {
    const { p, client } = this.client(provider);
    let scopes = q.scopes !== undefined ? splitScopes(q.scopes) : [...client.defaultScopes];
    let conn: ConnectorRecord | undefined;
    if (q.add_scopes !== undefined) {
      // Added to the scopes already granted: to the organization's latest OAuth connector of this provider.
      const existing = (await this.connectors.deps.store.connectors.list(org.id, p.key)).filter(
        (c) => c.connectionType === "oauth",
      );
      conn = existing[existing.length - 1];
      const base = q.scopes !== undefined ? scopes : conn ? splitScopes(conn.scopes ?? "") : scopes;
      scopes = [...new Set([...base, ...splitScopes(q.add_scopes)])];
    }
    const redirectUri = q.redirect_uri !== undefined ? httpUrl(q.redirect_uri, "redirect_uri") : defaultRedirect;
    // Spec 4.8: the caller's state as given (its rule is in the route's schema), or a new one.
    const state = q.state ?? newState();
    const now = Date.now();
    const recorded = await this.connectors.deps.store.oauthStates.insert({
      stateHash: stateHash(state),
      orgId: org.id,
      provider: p.key,
      redirectUri,
      scopes: scopes.join(","),
      connectorId: conn?.id ?? null,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + STATE_TTL_MS).toISOString(),
      usedAt: null,
      sessionHash: sessionHash ?? null,
    });
    if (!recorded) {
      // Only a caller's own state can collide (a generated one has 256 random bits).
      throw ApiError.validation(["state: is in use by another authorization; send another one or omit it"]);
    }
    const url = new URL(client.authorizeUrl);
    url.searchParams.set("response_type", "code");
    url.searchParams.set("client_id", client.clientId);
    url.searchParams.set("redirect_uri", redirectUri);
    if (scopes.length > 0) url.searchParams.set("scope", scopes.join(client.scopeSeparator));
    url.searchParams.set("state", state);
    return { authorize_url: url.href, state };
  }

  /** The console session an authorization is bound to (issue #14), if it is a pending one that is. */
  async boundSession(state: string): Promise<string | undefined> {
    const s = await this.connectors.deps.store.oauthStates.get(stateHash(state));
    return s?.sessionHash ?? undefined;
  }

  /**
   * The authorization `state` started, taken for one callback: `orgId` undefined (the browser's GET)
   * takes the organization from it. A state of another organization or provider is refused exactly as
   * an unknown one, so a caller learns nothing about other organizations' authorizations.
   */
  async claimState(
    provider: string,
    state: string,
    orgId: string | undefined,
    redirectUri?: string,
  ): Promise<OAuthStateRecord> {
    const store = this.connectors.deps.store.oauthStates;
    const hash = stateHash(state);
    const s = await store.get(hash);
    if (!s || s.provider !== provider || (orgId !== undefined && s.orgId !== orgId)) {
      throw ApiError.validation([
        "state: is not one this server issued to this organization for this provider; start again with authorize",
      ]);
    }
    if (redirectUri !== undefined && redirectUri !== s.redirectUri) {
      throw ApiError.validation(["redirect_uri: differs from the one the authorization URL was made with"]);
    }
    const now = new Date().toISOString();
    if (s.usedAt !== null) throw ApiError.validation(["state: was used already; start again with authorize"]);
    if (!(await store.use(hash, now))) {
      throw ApiError.validation(["state: has expired or was used already; start again with authorize"]);
    }
    return s;
  }

  async callback(
    org: OrgRecord,
    provider: string,
    s: OAuthStateRecord,
    code: string,
    policy: AccessPolicy | undefined,
    userId: string | undefined,
  ): Promise<ConnectorRecord> {
    const { p, client } = this.client(provider);
    let t: Awaited<ReturnType<typeof requestToken>>;
    try {
      t = await requestToken(client, { grant_type: "authorization_code", code, redirect_uri: s.redirectUri });
    } catch (err) {
      if (err instanceof TokenEndpointError) throw new ApiError(400, ErrorCode.ProviderFailed, err.message);
      throw err;
    }
    const scopes = t.scopes ?? s.scopes;
    const store = this.connectors.deps.store;
    const existing = s.connectorId ? await store.connectors.get(org.id, s.connectorId) : undefined;
    const secrets = { accessToken: t.accessToken, ...(t.refreshToken && { refreshToken: t.refreshToken }) };
    if (existing) {
      const updated = await store.connectors.update(org.id, existing.id, {
        ...(await this.connectors.deps.keys.seal(secrets, existing.id)),
        scopes,
        tokenExpiresAt: t.expiresAt ?? null,
        ...(policy && { accessPolicy: JSON.stringify(policy) }),
        updatedAt: new Date().toISOString(),
      });
      this.connectors.deps.changed?.(existing.id);
      if (updated) return updated;
    }
    return this.connectors.insert({
      org,
      provider: p,
      type: "oauth",
      secrets,
      accountId: t.accountId ?? "oauth",
      accountName: t.accountName,
      policy,
      scopes,
      expiresAt: t.expiresAt,
      userId,
    });
  }
}
