import type { Server } from "node:http";
import type { Logger } from "pino";
import type { ApiInstance } from "../api/instance.js";
import { parseDnsServer, type ServerConfig } from "../config.js";
import type { UnitRuntime } from "../runtime/runtime.js";
import type { ConnectorRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { TtlCache } from "./gateway/cache.js";
import { systemResolver, upstreamResolver } from "./gateway/pinned-target.js";
import { createGatewayServer } from "./gateway/server.js";
import { GatewayUnitAddressBook } from "./gateway/unit-address.js";
import { OAuthFlow } from "./oauth/flow.js";
import { loadConnectorsConfig, ProviderRegistry } from "./registry/registry.js";
import { browserCallbackRoutes } from "./routes/browser-callback.js";
import { connectorRoutes } from "./routes/routes.js";
import { Credentials, Keys } from "./secrets/secrets.js";
import { ConnectorService } from "./service/service.js";

/** Everything of the connectors feature a server runs: API routes and the gateway listener. */
export interface Connectors {
  readonly service: ConnectorService;
  readonly oauth: OAuthFlow;
  readonly gateway: Server;
  /** The port the gateway listens on, once it does. */
  gatewayPort(): number;
  listen(): Promise<number>;
  close(): Promise<void>;
}

export interface ConnectorsOpts {
  readonly config: ServerConfig;
  readonly store: Store;
  /** The runtime of this process's node (units reach its gateway); undefined: none (`--role api`). */
  readonly runtime: Pick<UnitRuntime, "unitOfAddress" | "link"> | undefined;
  readonly log: Logger;
  /** This server's API base URL (known once it listens). */
  readonly apiBase: () => string;
}

export async function openConnectors(o: ConnectorsOpts): Promise<Connectors> {
  const registry = new ProviderRegistry(loadConnectorsConfig(o.config.connectorsConfig));
  const keys = await Keys.load(o.config.dataDir);

  const cache = {
    connectors: new TtlCache<ConnectorRecord | undefined>(1000),
  };
  const changed = (id: string) => cache.connectors.delete(id);
  const credentials = new Credentials(o.store, keys, registry, changed);
  const gateway = createGatewayServer({
    cache,
    store: o.store,
    registry,
    credentials,
    addresses: new GatewayUnitAddressBook(o.runtime),
    apiBase: o.apiBase,
    log: o.log,
    // Provider host names resolve through the server's DNS upstream when one is set (the one
    // units' lookups go to), else through the system resolver.
    targets: {
      resolve: o.config.dnsUpstream ? upstreamResolver(parseDnsServer(o.config.dnsUpstream)) : systemResolver,
      allowed: registry.allowedBaseUrlRanges,
    },
    ...(registry.ca && { ca: registry.ca }),
    limits: o.config.connectionLimits,
  });
  const gatewayPort = () => {
    const a = gateway.address();
    return typeof a === "object" && a ? a.port : o.config.gatewayPort;
  };
  const service = new ConnectorService({
    store: o.store,
    registry,
    keys,
    gatewayBase: () => `http://ums.internal:${gatewayPort()}`,
    changed,
  });
  return {
    service,
    oauth: new OAuthFlow(service),
    gateway,
    gatewayPort,
    listen: () =>
      new Promise((resolve, reject) => {
        gateway.once("error", reject);
        gateway.listen({ host: "0.0.0.0", port: o.config.gatewayPort }, () => {
          gateway.off("error", reject);
          // Units connect here: a failed accept later is logged, never the end of ums serve.
          gateway.on("error", (err) => o.log.error({ err }, "connectors gateway socket error"));
          resolve(gatewayPort());
        });
      }),
    close: () =>
      new Promise((resolve) => {
        if (!gateway.listening) return resolve();
        gateway.close(() => resolve());
        gateway.closeAllConnections();
      }),
  };
}

/** Registers the connector routes: bearer-authenticated ones in `api`, the browser callback in `open`. */
export function registerConnectorRoutes(api: ApiInstance, c: Connectors): void {
  connectorRoutes(api, c.service, c.oauth);
}

export function registerBrowserCallback(open: ApiInstance, c: Connectors, store: Store): void {
  browserCallbackRoutes(open, c.oauth, store);
}
