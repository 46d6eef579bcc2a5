import type { AccessPolicy, Connection } from "@ums/protocol";
import type { ConnectorRecord } from "../../store/records.js";

/** Spec 2.11: the wire shape; `secret` and `keyVersion` never leave the server. */
export function presentConnection(c: ConnectorRecord, gatewayBase: string): Connection {
  const info = JSON.parse(c.providerInfo) as Record<string, unknown>;
  const policy = JSON.parse(c.accessPolicy) as AccessPolicy;
  return {
    id: c.id,
    provider: c.provider,
    provider_account_id: c.providerAccountId,
    ...(c.providerAccountName !== null && { provider_account_name: c.providerAccountName }),
    connection_type: c.connectionType,
    access_policy: policy,
    ...(c.scopes !== null && { scopes: c.scopes }),
    provider_info: info,
    ...(c.tokenExpiresAt !== null && { token_expires_at: c.tokenExpiresAt }),
    inserted_at: c.insertedAt,
    updated_at: c.updatedAt,
    usage_snippet: `curl ${gatewayBase}/v1/gateway/${c.provider}/${c.id}/${c.provider === "sprites_admin" ? "v1/units" : ""}`,
    ...(c.userId !== null && { user_id: c.userId }),
  };
}
