import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AccessPolicy, ErrorCode } from "@ums/protocol";
import type { Logger } from "pino";
import { ApiError } from "../../errors/api-error.js";
import { writeError } from "../../errors/respond.js";
import { metrics } from "../../metrics/server-metrics.js";
import type { ConnectorRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { TokenEndpointError } from "../oauth/token.js";
import type { ProviderRegistry } from "../registry/registry.js";
import type { Credentials } from "../secrets/secrets.js";
import type { TtlCache } from "./cache.js";
import { credentialHeaders, strippedHeader } from "./credential.js";
import { forward } from "./forward.js";
import { normalizeGatewayPath } from "./path.js";
import { type PinnedAddress, pinnedLookup, pinTarget, type TargetPolicy, TargetRefused } from "./pinned-target.js";
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
}

export interface GatewayCache {
  readonly connectors: TtlCache<ConnectorRecord | undefined>;
}

/** Answers an error the way the API does (errors/respond.ts: one shape, one place). */
function fail(
  res: ServerResponse,
  status: number,
  code: string,
  error: string,
  details?: Record<string, unknown>,
): void {
  writeError(res, new ApiError(status, code, error, undefined, undefined, { details }));
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

/**
 * The connector gateway (issue #7): `/v1/gateway/<provider>/<connection_id>/<provider_path>`,
 * answered only to units (by source and gateway address), under the connector's access policy
 * (spec 2.11), with the caller's own credentials stripped and the connector's applied.
 */
export function gatewayHandler(d: GatewayDeps) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const started = performance.now();
    const raw = req.url ?? "/";
    const q = raw.indexOf("?");
    const rawPath = q < 0 ? raw : raw.slice(0, q);
    const query = q < 0 ? "" : raw.slice(q);
    const unitId = d.addresses.unitIdByAddress(req.socket.remoteAddress, req.socket.localAddress);
    if (!unitId) {
      return fail(res, 401, ErrorCode.GatewayUnauthorized, "the gateway answers only units, at their gateway address");
    }
    const m = /^\/v1\/gateway\/([a-z0-9_]{1,64})\/(conn_[a-z0-9]{1,64})(\/.*)?$/.exec(rawPath);
    if (!m) {
      return fail(res, 404, ErrorCode.RouteNotFound, "gateway paths are /v1/gateway/<provider>/<connection_id>/<path>");
    }
    const [, providerKey = "", connId = "", rest = "/"] = m;
    const [unit, conn] = await Promise.all([
      // Not cached: labels and names change through the units API, and policy must see them at once.
      d.store.units.callerById(unitId),
      d.cache.connectors.get(connId, () => d.store.connectors.getById(connId)),
    ]);
    const provider = d.registry.get(providerKey);
    if (!unit || !conn || !provider || conn.provider !== providerKey || conn.orgId !== unit.orgId) {
      return fail(
        res,
        404,
        ErrorCode.ConnectionNotFound,
        `connector '${connId}' of provider '${providerKey}' not found`,
      );
    }
    const path = normalizeGatewayPath(rest);
    if (!path.ok) return fail(res, 400, ErrorCode.Validation, path.reason);
    if (provider.internal && !ADMIN_PATH.test(path.match)) {
      return fail(res, 403, ErrorCode.ConnectorPolicyDenied, "sprites_admin connectors reach only /v1/units");
    }
    const { policy, userBase } = parsedConnector(conn);
    const decision = evaluatePolicy(policy, unit, path.match);
    if (!decision.allowed) {
      return fail(res, 403, ErrorCode.ConnectorPolicyDenied, decision.reason, {
        ...(decision.missingLabels && { missing_labels: decision.missingLabels }),
      });
    }
    let secrets: Awaited<ReturnType<Credentials["forUse"]>>;
    try {
      secrets = await d.credentials.forUse(conn);
    } catch (err) {
      if (err instanceof TokenEndpointError) return fail(res, 502, ErrorCode.ProviderFailed, err.message);
      throw err;
    }
    const base = provider.internal ? d.apiBase() : (userBase ?? provider.apiBaseUrl);
    const url = new URL(base.replace(/\/+$/, "") + path.forward + query);
    const dropped = strippedHeader(provider, req.headers.connection);
    const sigv4 = provider.auth.kind === "sigv4";
    const headers: Record<string, string | string[]> = {};
    for (const k in req.headers) {
      const v = req.headers[k];
      if (v === undefined || dropped(k) || (sigv4 && k.startsWith("x-amz-"))) continue;
      headers[k] = v;
    }
    Object.assign(
      headers,
      provider.extraHeaders,
      credentialHeaders(provider, secrets, { method: req.method ?? "GET", url }),
    );
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
          return fail(res, 502, ErrorCode.ProviderFailed, `connector '${conn.id}': base_api_url host: ${message}`);
        }
        return fail(
          res,
          502,
          ErrorCode.ProviderFailed,
          `the provider could not be reached (${providerKey}): ${message}`,
        );
      }
    }
    forward(req, res, {
      url,
      headers,
      ...(pinned && { lookup: pinnedLookup(pinned) }),
      done: (status) => {
        if (status instanceof Error) {
          fail(res, 502, ErrorCode.ProviderFailed, `the provider could not be reached (${providerKey})`);
          d.log.warn({ ...log, err: status.message }, "gateway upstream failed");
          return;
        }
        d.log.info({ ...log, status, ms: Math.round((performance.now() - started) * 100) / 100 }, "gateway");
      },
    });
  };
}

/** The gateway's own listener (0.0.0.0:<gatewayPort>); the firewall lets units reach only this port. */
export function createGatewayServer(d: GatewayDeps): Server {
  const handle = gatewayHandler(d);
  const server = createServer((req, res) => {
    // Every call counts once, by status class; one whose answer never completed as "error".
    res.once("close", () => metrics.gatewayCall(res.writableFinished ? res.statusCode : 0));
    handle(req, res).catch((err) => {
      d.log.error({ err: err instanceof Error ? err.message : String(err) }, "gateway internal error");
      if (!res.headersSent) fail(res, 500, ErrorCode.Internal, "internal error; see the server log");
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 30_000;
  return server;
}
