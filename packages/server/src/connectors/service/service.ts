import { createHash } from "node:crypto";
import { type AccessPolicy, type ApiKeyRequest, type Connection, ErrorCode } from "@ums/protocol";
import { mintToken, randomString } from "../../auth/tokens.js";
import { ApiError } from "../../errors/api-error.js";
import type { ConnectorRecord, OrgRecord, TokenRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import type { ProviderRegistry, ResolvedProvider } from "../registry/registry.js";
import type { Keys, Secrets } from "../secrets/secrets.js";
import { checkBaseApiUrl } from "./base-url.js";
import { presentConnection } from "./present.js";

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

export function newConnectionId(): string {
  return `conn_${randomString(24, ID_ALPHABET)}`;
}

/** Who asks: the request's bearer token and its organization (the routes pass `req.auth`). */
export interface Caller {
  readonly token: TokenRecord;
  readonly org: OrgRecord;
}

export interface ConnectorDeps {
  readonly store: Store;
  readonly registry: ProviderRegistry;
  readonly keys: Keys;
  /** `http://ums.internal:<gateway port>`: how units reach the gateway (usage_snippet). */
  readonly gatewayBase: () => string;
  /** Called after a connector changed or went (the gateway drops what it cached of it). */
  readonly changed?: (id: string) => void;
}

export interface NewConnection {
  readonly org: OrgRecord;
  readonly provider: ResolvedProvider;
  readonly type: ConnectorRecord["connectionType"];
  readonly secrets: Secrets;
  readonly accountId: string;
  readonly accountName?: string | undefined;
  readonly policy?: AccessPolicy | undefined;
  readonly scopes?: string | undefined;
  readonly info?: Record<string, unknown>;
  readonly expiresAt?: string | undefined;
  readonly userId?: string | undefined;
}

/** Spec 4.8: the connector use cases between the routes and the store. */
export class ConnectorService {
  constructor(readonly deps: ConnectorDeps) {}

  present(c: ConnectorRecord): Connection {
    return presentConnection(c, this.deps.gatewayBase());
  }

  provider(key: string, status = 400): ResolvedProvider {
    const p = this.deps.registry.get(key);
    if (!p) {
      const msg = `unknown provider '${key}'; GET /v1/oauth/providers lists them`;
      if (status === 404) throw new ApiError(404, ErrorCode.ProviderNotFound, msg);
      throw ApiError.validation([`provider: ${msg}`]);
    }
    return p;
  }

  async require(org: OrgRecord, id: string): Promise<ConnectorRecord> {
    const c = /^conn_[a-z0-9]{1,64}$/.test(id) ? await this.deps.store.connectors.get(org.id, id) : undefined;
    if (!c) throw new ApiError(404, ErrorCode.ConnectionNotFound, `connector '${id}' not found`);
    return c;
  }

  async insert(n: NewConnection): Promise<ConnectorRecord> {
    const id = newConnectionId();
    const now = new Date().toISOString();
    const rec: ConnectorRecord = {
      id,
      orgId: n.org.id,
      provider: n.provider.key,
      connectionType: n.type,
      providerAccountId: n.accountId,
      providerAccountName: n.accountName ?? null,
      accessPolicy: JSON.stringify(n.policy ?? {}),
      scopes: n.scopes ?? null,
      providerInfo: JSON.stringify(n.info ?? {}),
      tokenExpiresAt: n.expiresAt ?? null,
      userId: n.userId ?? null,
      ...(await this.deps.keys.seal(n.secrets, id)),
      insertedAt: now,
      updatedAt: now,
    };
    await this.deps.store.connectors.insert(rec);
    return rec;
  }

  async createApiKey(auth: Caller, body: ApiKeyRequest): Promise<ConnectorRecord> {
    const p = this.provider(body.provider);
    if (p.internal) {
      throw ApiError.validation([`provider: '${p.key}' takes no api_key; use POST /v1/oauth/connections/provision`]);
    }
    if (p.auth.kind === "sigv4" && !/^[^:\s]+:[^:\s]+(?::[a-z0-9-]+)?$/.test(body.api_key)) {
      throw ApiError.validation([
        "api_key: must be '<access key id>:<secret access key>[:<region>]' for this provider",
      ]);
    }
    const base = checkBaseApiUrl(p, body.base_api_url, this.deps.registry);
    // A key identifier that reveals nothing of the key (spec 2.11 provider_account_id).
    const fingerprint = createHash("sha256").update(body.api_key).digest("hex").slice(0, 12);
    return this.insert({
      org: auth.org,
      provider: p,
      type: "api_key",
      secrets: { apiKey: body.api_key },
      accountId: p.auth.kind === "sigv4" ? (body.api_key.split(":")[0] as string) : `key_${fingerprint}`,
      accountName: body.provider_account_name,
      policy: body.access_policy,
      info: base ? { base_api_url: base } : {},
      userId: auth.token.id,
    });
  }

  /** Spec 4.8 provision: a platform key from server configuration; sprites_admin mints a ums token. */
  async provision(auth: Caller, key: string, policy: AccessPolicy | undefined): Promise<ConnectorRecord> {
    const p = this.provider(key);
    if (!p.platformKeys) {
      throw ApiError.validation([`provider: '${p.key}' does not support platform-managed keys; use api_key or OAuth`]);
    }
    if (p.internal) {
      const { secret, record } = await mintToken(this.deps.store.tokens, {
        orgId: auth.org.id,
        name: `connector ${p.key}`,
        role: "member",
      });
      return this.insert({
        org: auth.org,
        provider: p,
        type: "internal",
        secrets: { umsToken: secret },
        accountId: auth.org.slug,
        accountName: `ums organization ${auth.org.slug}`,
        policy,
        info: { token_id: record.id },
        userId: auth.token.id,
      });
    }
    if (!this.deps.registry.platformKey(p.key)) {
      throw ApiError.validation([
        `provider: this server has no platform key for '${p.key}' (connectors config platformKeys.${p.key})`,
      ]);
    }
    return this.insert({
      org: auth.org,
      provider: p,
      type: "provisioned",
      secrets: {},
      accountId: "platform",
      accountName: "platform-managed key",
      policy,
      userId: auth.token.id,
    });
  }

  async setPolicy(org: OrgRecord, id: string, policy: AccessPolicy): Promise<ConnectorRecord> {
    await this.require(org, id);
    const c = await this.deps.store.connectors.update(org.id, id, {
      accessPolicy: JSON.stringify(policy),
      updatedAt: new Date().toISOString(),
    });
    this.deps.changed?.(id);
    if (!c) throw new ApiError(404, ErrorCode.ConnectionNotFound, `connector '${id}' not found`);
    return c;
  }

  /** Deletes the row and its sealed credentials; a sprites_admin connector's ums token is revoked. */
  async delete(org: OrgRecord, id: string): Promise<void> {
    const c = await this.require(org, id);
    const tokenId = (JSON.parse(c.providerInfo) as { token_id?: unknown }).token_id;
    if (c.connectionType === "internal" && typeof tokenId === "string") {
      await this.deps.store.tokens.revoke(tokenId, new Date().toISOString());
    }
    const deleted = await this.deps.store.connectors.delete(org.id, id);
    this.deps.changed?.(id);
    if (!deleted) {
      throw new ApiError(404, ErrorCode.ConnectionNotFound, `connector '${id}' not found`);
    }
  }
}
