import { createServer as createNetServer } from "node:net";
import type { FastifyBaseLogger } from "fastify";
import type { Logger } from "pino";
import { buildApp } from "./api/app.js";
import type { ApiInstance } from "./api/instance.js";
import { HostSockets } from "./api/internal/host-sockets.js";
import { HttpTargets } from "./api/proxy/target.js";
import { unitUrl } from "./api/units/present.js";
import { parseDnsServer, type ServerConfig } from "./config.js";
import { type Connectors, openConnectors } from "./connectors/index.js";
import { secureDataDir } from "./data-dir.js";
import { Lifecycle } from "./lifecycle/lifecycle.js";
import { createLogger } from "./log.js";
import { hostResolver, NetworkEgress } from "./network/egress.js";
import { openHostRuntime } from "./runtime/host.js";
import type { UnitRuntime } from "./runtime/runtime.js";
import { openStore } from "./store/open.js";
import type { Store } from "./store/store.js";

export interface RunningServer {
  /** Base URL of the API, e.g. http://127.0.0.1:7070 */
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  readonly runtime: UnitRuntime;
  readonly lifecycle: Lifecycle;
  readonly egress: NetworkEgress;
  readonly app: ApiInstance;
  /** The connector gateway's port (units reach it at their gateway address). */
  readonly gatewayPort: number;
  close(): Promise<void>;
}

/** Fails at once when the listen address is taken, before the slow parts of a start. */
function assertCanListen(host: string, port: number): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once("error", reject);
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

export interface StartOpts {
  logger?: Logger;
  /** Injected by tests; opened from the config otherwise (and then closed with the server). */
  store?: Store;
  runtime?: UnitRuntime;
  /** The idle sweep interval (tests shorten it). */
  sweepMs?: number;
  /** Aborts a start that is still building the base image (SIGTERM during the first start). */
  signal?: AbortSignal;
}

/**
 * Opens the store (migrating it) and the host runtime (pool, base image, runc), re-adopts the
 * units that kept running, builds the API and listens.
 */
export async function startServer(config: ServerConfig, opts: StartOpts = {}): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger();
  await assertCanListen(config.listenHost, config.listenPort);
  await assertCanListen("0.0.0.0", config.gatewayPort);
  await secureDataDir(config.dataDir);
  const store =
    opts.store ??
    (await openStore({
      ...config,
      onIdleError: (err) => logger.warn({ err: err.message }, "idle database connection lost; it will be replaced"),
    }));
  let port = config.listenPort;
  let runtime: UnitRuntime | undefined;
  let lifecycle: Lifecycle | undefined;
  let hostSockets: HostSockets | undefined;
  let egress: NetworkEgress | undefined;
  let connectors: Connectors | undefined;
  let app: ApiInstance;
  try {
    runtime =
      opts.runtime ?? (await openHostRuntime({ ...config, ...(opts.signal && { signal: opts.signal }) }, logger));
    lifecycle = new Lifecycle(
      store,
      runtime,
      {
        idleWarmMs: config.idleWarmMs,
        idleColdMs: config.idleColdMs,
        sweepMs: opts.sweepMs ?? 1000,
        busyCpu: 0.05,
        agentTimeouts: { connectMs: config.agentConnectTimeoutMs, answerMs: config.agentAnswerTimeoutMs },
      },
      logger,
      async (unit) => ({
        unitId: unit.id,
        name: unit.name,
        url: unitUrl(config, port, unit.urlLabel),
        resources: JSON.parse(unit.resources),
        privileges: JSON.parse(unit.privileges),
        network: unit.network,
      }),
    );
    const httpTargets = new HttpTargets(runtime, lifecycle);
    hostSockets = new HostSockets({ store, runtime, lifecycle, log: logger, httpTargets });
    const sockets = hostSockets;
    const upstream = config.dnsUpstream ? parseDnsServer(config.dnsUpstream) : hostResolver();
    const net = new NetworkEgress({ store, runtime, upstream, log: logger });
    egress = net;
    lifecycle.setHooks({
      running: async (id) => {
        await sockets.open(id);
        await net.open(id);
      },
      stopped: async (id) => {
        await net.close(id);
        await sockets.close(id);
      },
    });
    await lifecycle.start();
    const apiHost = ["0.0.0.0", "::"].includes(config.listenHost)
      ? "127.0.0.1"
      : config.listenHost.includes(":")
        ? `[${config.listenHost}]`
        : config.listenHost;
    connectors = await openConnectors({
      config,
      store,
      runtime,
      log: logger,
      apiBase: () => `http://${apiHost}:${port}`,
    });
    const gatewayPort = await connectors.listen();
    await runtime.allowGatewayPort?.(gatewayPort);
    app = await buildApp({
      store,
      config,
      logger: logger as FastifyBaseLogger,
      runtime,
      lifecycle,
      httpTargets,
      egress: net,
      connectors,
    });
    // The files this start made (runtime id, keys, locks) are root's alone too.
    await secureDataDir(config.dataDir);
    await app.listen({ host: config.listenHost, port: config.listenPort });
  } catch (err) {
    await lifecycle?.stop().catch(() => {});
    await hostSockets?.closeAll();
    await egress?.closeAll();
    await connectors?.close();
    if (!opts.store) await store.close();
    throw err;
  }
  const address = app.server.address();
  port = typeof address === "object" && address ? address.port : config.listenPort;
  const host = config.listenHost.includes(":") ? `[${config.listenHost}]` : config.listenHost;
  const url = `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`;
  logger.info(
    { url, port, gatewayPort: connectors.gatewayPort(), dialect: store.dialect, dataDir: config.dataDir },
    "ums listening",
  );
  let closing: Promise<void> | undefined;
  const rt = runtime;
  const lc = lifecycle;
  const hs = hostSockets;
  const eg = egress as NetworkEgress;
  const cn = connectors;
  return {
    url,
    port,
    store,
    runtime: rt,
    lifecycle: lc,
    egress: eg,
    app,
    gatewayPort: cn.gatewayPort(),
    close() {
      // Units keep running when the server stops (DESIGN.md section 3).
      closing ??= (async () => {
        await cn.close();
        await app.close();
        await lc.stop();
        await hs?.closeAll();
        await eg.closeAll();
        if (!opts.store) await store.close();
      })();
      return closing;
    },
  };
}
