import { type AccessPolicy, ErrorCode } from "@ums/protocol";
import type { Logger } from "pino";
import { ApiError } from "../../errors/api-error.js";
import type { ConnectionLimits } from "../../http/limits.js";
import type { ConnectorRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { TokenEndpointError } from "../oauth/token.js";
import type { ProviderRegistry, ResolvedProvider } from "../registry/registry.js";
import type { Credentials } from "../secrets/secrets.js";
import type { TtlCache } from "./cache.js";
import { credentialHeaders, strippedHeader } from "./credential.js";
import { normalizeGatewayPath } from "./path.js";
import { type PinnedAddress, pinTarget, type TargetPolicy, TargetRefused } from "./pinned-target.js";
import { evaluatePolicy } from "./policy.js";
import type { GatewayUnitAddressBook } from "./unit-address.js";

export interface GatewayDeps {
  readonly store: Store;
  readonly registry: ProviderRegistry;
  readonly credentials: Credentials;
  readonly addresses: GatewayUnitAddressBook;
  /** Base URL of this server's own API (sprites_admin). */
  readonly apiBase: () => string;
  readonly log: Logger;
  readonly cache: GatewayCache;
  /** Where user-given base URLs may lead (issue #19 finding 7). */
  readonly targets: TargetPolicy;
  /** Certificates trusted for providers besides Node's bundled roots (the connectors config's `caFile`). */
  readonly ca?: readonly string[];
  /** The server's connection limits (its headers and body idle timeouts); else the defaults. */
  readonly limits?: ConnectionLimits;
}

export interface GatewayCache {
  readonly connectors: TtlCache<ConnectorRecord | undefined>;
}

/** What every call reads of its connector's JSON columns, parsed once per record read from the store. */
interface ParsedConnector {
  readonly policy: AccessPolicy;
  /** The connection's own base URL (`provider_info.base_api_url`), if it has one. */
  readonly userBase: string | undefined;
}

// Keyed by the record itself: the connector cache (cache.ts) hands out the same object until it
// reads the row again, and a record that changed is a new object.
const parsedConnectors = new WeakMap<ConnectorRecord, ParsedConnector>();

function parsedConnector(conn: ConnectorRecord): ParsedConnector {
  let parsed = parsedConnectors.get(conn);
  if (!parsed) {
    const info = JSON.parse(conn.providerInfo) as { base_api_url?: string };
    parsed = { policy: JSON.parse(conn.accessPolicy) as AccessPolicy, userBase: info.base_api_url };
    parsedConnectors.set(conn, parsed);
  }
  return parsed;
}

/** sprites_admin reaches only the units resource of this API (never tokens, connectors or policies of connectors). */
const ADMIN_PATH = /^\/v1\/units(?:\/|$)/;

/** A field value as RFC 9110 §5.5 has it: visible characters, spaces and tabs, obs-text. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** A caller's request as far as the gateway reads it before forwarding. */
export interface CallerRequest {
  readonly method: string;
  /** The request target as sent (origin form: path and query). */
  readonly target: string;
  readonly remoteAddress: string | undefined;
  readonly localAddress: string | undefined;
  /** The caller's `Connection` field (its values joined), naming hop-by-hop fields. */
  readonly connection: string | undefined;
}

/** A call the gateway forwards: where to, with which fields, and what its log line says. */
export interface GatewayCall {
  readonly url: URL;
  readonly providerKey: string;
  /** The address a user-given base URL's host was checked at (pinned-target.ts); connect only there. */
  readonly pinned: PinnedAddress | undefined;
  /** Whether a caller's field (lower-case name) goes on to the provider. */
  readonly keeps: (name: string) => boolean;
  /** Fields the gateway sets (the provider's own, the connector's credential), lower-case names. */
  readonly fields: Readonly<Record<string, string>>;
  readonly log: Readonly<Record<string, unknown>>;
  readonly startedAt: number;
}

function fail(status: number, code: string, error: string, details?: Record<string, unknown>): never {
  throw new ApiError(status, code, error, undefined, undefined, { details });
}

/**
 * The connector gateway (issue #7): `/v1/gateway/<provider>/<connection_id>/<provider_path>`,
 * answered only to units (by source and gateway address), under the connector's access policy
 * (spec 2.11), with the caller's own credentials stripped and the connector's applied. Everything
 * decided before a byte goes to the provider, for both ways a call is forwarded (server.ts on
 * Node's HTTP objects, fast.ts on raw connections); throws the `ApiError` to answer.
 */
export async function prepareCall(d: GatewayDeps, req: CallerRequest): Promise<GatewayCall> {
  const startedAt = performance.now();
  const raw = req.target;
  const q = raw.indexOf("?");
  const rawPath = q < 0 ? raw : raw.slice(0, q);
  const query = q < 0 ? "" : raw.slice(q);
  const unitId = d.addresses.unitIdByAddress(req.remoteAddress, req.localAddress);
  if (!unitId) {
    fail(401, ErrorCode.GatewayUnauthorized, "the gateway answers only units, at their gateway address");
  }
  const m = /^\/v1\/gateway\/([a-z0-9_]{1,64})\/(conn_[a-z0-9]{1,64})(\/.*)?$/.exec(rawPath);
  if (!m) fail(404, ErrorCode.RouteNotFound, "gateway paths are /v1/gateway/<provider>/<connection_id>/<path>");
  const [, providerKey = "", connId = "", rest = "/"] = m;
  const [unit, conn] = await Promise.all([
    // Not cached: labels and names change through the units API, and policy must see them at once.
    d.store.units.callerById(unitId),
    d.cache.connectors.get(connId, () => d.store.connectors.getById(connId)),
  ]);
  const provider = d.registry.get(providerKey);
  if (!unit || !conn || !provider || conn.provider !== providerKey || conn.orgId !== unit.orgId) {
    fail(404, ErrorCode.ConnectionNotFound, `connector '${connId}' of provider '${providerKey}' not found`);
  }
  const path = normalizeGatewayPath(rest);
  if (!path.ok) fail(400, ErrorCode.Validation, path.reason);
  if (provider.internal && !ADMIN_PATH.test(path.match)) {
    fail(403, ErrorCode.ConnectorPolicyDenied, "sprites_admin connectors reach only /v1/units");
  }
  const { policy, userBase } = parsedConnector(conn);
  const decision = evaluatePolicy(policy, unit, path.match);
  if (!decision.allowed) {
    fail(403, ErrorCode.ConnectorPolicyDenied, decision.reason, {
      ...(decision.missingLabels && { missing_labels: decision.missingLabels }),
    });
  }
  let secrets: Awaited<ReturnType<Credentials["forUse"]>>;
  try {
    secrets = await d.credentials.forUse(conn);
  } catch (err) {
    if (err instanceof TokenEndpointError) fail(502, ErrorCode.ProviderFailed, err.message);
    throw err;
  }
  const base = provider.internal ? d.apiBase() : (userBase ?? provider.apiBaseUrl);
  const url = new URL(base.replace(/\/+$/, "") + path.forward + query);
  // No prototype: `keeps` asks it by a caller's field name, which may be "constructor".
  const fields: Record<string, string> = Object.create(null);
  const own = { ...provider.extraHeaders, ...credentialHeaders(provider, secrets, { method: req.method, url }) };
  for (const k in own) fields[k.toLowerCase()] = own[k] as string;
  for (const k in fields) {
    // A secret with a line break would add fields (or a request) of the caller's making.
    if (!FIELD_VALUE.test(fields[k] as string)) {
      fail(502, ErrorCode.ProviderFailed, `connector '${conn.id}': its credential is not a valid header value`);
    }
  }
  const log = { unit: unit.name, connector: conn.id, provider: providerKey, method: req.method, path: path.match };
  // A user-given base URL is checked here, at connect time, whatever was checked when it was
  // stored: the connection goes to the one address checked (pinned-target.ts).
  let pinned: PinnedAddress | undefined;
  if (userBase && !d.registry.allowPrivateBaseUrls) {
    try {
      pinned = await pinTarget(url, d.targets);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      d.log.warn({ ...log, host: url.hostname, err: message }, "gateway target refused or unresolved");
      if (err instanceof TargetRefused) {
        fail(502, ErrorCode.ProviderFailed, `connector '${conn.id}': base_api_url host: ${message}`);
      }
      fail(502, ErrorCode.ProviderFailed, `the provider could not be reached (${providerKey}): ${message}`);
    }
  }
  return { url, providerKey, pinned, keeps: keptField(provider, req.connection, fields), fields, log, startedAt };
}

/**
 * Whether a caller's field goes on: not one of the stripped (credential.ts), not an `x-amz-*` one
 * of a SigV4 provider (the signature is the gateway's), not one the gateway sets itself.
 */
function keptField(
  provider: ResolvedProvider,
  connection: string | undefined,
  fields: Readonly<Record<string, string>>,
): (name: string) => boolean {
  const dropped = strippedHeader(provider, connection);
  const sigv4 = provider.auth.kind === "sigv4";
  return (name) => !dropped(name) && !(sigv4 && name.startsWith("x-amz-")) && !Object.hasOwn(fields, name);
}

/** The provider could not be reached, or broke off: what the caller is answered (before any of the answer). */
export function providerFailed(call: GatewayCall): ApiError {
  return new ApiError(502, ErrorCode.ProviderFailed, `the provider could not be reached (${call.providerKey})`);
}
