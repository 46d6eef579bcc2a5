import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createRequire } from "node:module";
import { createServer as createNetServer } from "node:net";
import type { FastifyBaseLogger } from "fastify";
import type { Logger } from "pino";
import { buildApp } from "./api/app.js";
import type { ApiInstance } from "./api/instance.js";
import type { McpHandler } from "./api/mcp/routes.js";
import { unitUrl } from "./api/units/present.js";
import type { ServerConfig } from "./config.js";
import { type Connectors, openConnectors } from "./connectors/index.js";
import { Keys } from "./connectors/secrets/secrets.js";
import { secureDataDir } from "./data-dir.js";
import { EventLog } from "./events/event-log.js";
import { type LimitReached, limitReachedRecorder } from "./events/limit.js";
import { Webhooks } from "./events/webhooks.js";
import type { Lifecycle } from "./lifecycle/lifecycle.js";
import { createLogger } from "./log.js";
import { metrics } from "./metrics/server-metrics.js";
import type { NetworkEgress } from "./network/egress.js";
import { NodeDirectory } from "./node/directory.js";
import type { LocalNode } from "./node/local/local-node.js";
import { openLocalNode } from "./node/local/open.js";
import { NodePlacement } from "./node/placement/node-placement.js";
import { NodeRegistration } from "./node/registry/registration.js";
import { NodeEndpoint } from "./node/remote/node-endpoint.js";
import { AgentLogCap } from "./runtime/agent-log-cap.js";
import { runFromHelper } from "./runtime/exec/host-command.js";
import type { UnitRuntime } from "./runtime/runtime.js";
import { poolPaths } from "./runtime/storage/pool.js";
import { openStore } from "./store/open.js";
import type { Store } from "./store/store.js";
import { closeTracing, openTracing } from "./tracing/tracing.js";
import { type OnLimitReached, UsageSampler } from "./usage/sampler.js";
import { watchLoopStalls } from "./util/loop-stall.js";

export interface RunningServer {
  /** Base URL of the API, e.g. http://127.0.0.1:7070 */
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  /** The node of this host (the API's only way to its units), and its parts, for tests and tools. */
  readonly node: LocalNode;
  readonly runtime: UnitRuntime;
  readonly lifecycle: Lifecycle;
  readonly egress: NetworkEgress;
  readonly app: ApiInstance;
  /** The connector gateway's port (units reach it at their gateway address). */
  readonly gatewayPort: number;
  /** Issue #17: the lifecycle events of this server's organizations. */
  readonly events: EventLog;
  /** Records a `limit.reached` event of kind memory or disk (for the usage sampler to call). */
  readonly limitReached: LimitReached;
  /** Samples running units' usage (issue #17); undefined with --no-metrics. */
  readonly sampler: UsageSampler | undefined;
  /** The port of `--metrics-listen`, if set. */
  readonly metricsPort: number | undefined;
  /** Issue #15: the port of the node endpoint (`--node-listen`), if this process serves one. */
  readonly nodeEndpointPort: number | undefined;
  close(): Promise<void>;
}

/** The version of ums this server runs (its package's). */
function serverVersion(): string {
  const pkg = createRequire(import.meta.url)("../package.json") as { version?: string };
  return pkg.version ?? "unknown";
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
  /** The MCP endpoint's handler (`/v1/mcp`, api/mcp/routes.ts), given by `ums serve`. */
  mcp?: McpHandler;
  /** The console's build (issue #14); default packages/console/dist. */
  consoleDir?: string;
  /** How often units' usage is sampled (10 s; tests shorten it). */
  usageIntervalMs?: number;
  /** Told when the sampler sees a unit reach its memory or disk limit (issue #17; lifecycle events hook here). */
  onLimitReached?: OnLimitReached;
}

/** `--metrics-listen`: GET /metrics without a token, nothing else. */
async function listenMetrics(host: string, port: number): Promise<HttpServer> {
  const server = createHttpServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("only GET /metrics here\n");
      return;
    }
    metrics
      .exposition()
      .then(
        (text) => res.writeHead(200, { "content-type": metrics.contentType }).end(req.method === "HEAD" ? "" : text),
        () => res.writeHead(500, { "content-type": "text/plain" }).end("metrics failed\n"),
      )
      .catch(() => res.destroy());
  });
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server;
}

/**
 * Opens the store (migrating it) and this host's node (runtime, lifecycle, re-adopting the units
 * that kept running), the connectors and their gateway, builds the API on the node and listens.
 */
export async function startServer(config: ServerConfig, opts: StartOpts = {}): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger();
  await assertCanListen(config.listenHost, config.listenPort);
  await assertCanListen("0.0.0.0", config.gatewayPort);
  await secureDataDir(config.dataDir);
  // Host commands from a helper process, not forks of this one (runtime/exec/spawner.ts).
  const releaseHelper = runFromHelper();
  const stopStallWatch = watchLoopStalls((ms) =>
    logger.warn({ ms }, "the event loop was blocked (or the process got no CPU) for this long: every request waited"),
  );
  const store =
    opts.store ??
    (await openStore({
      ...config,
      onIdleError: (err) => logger.warn({ err: err.message }, "idle database connection lost; it will be replaced"),
      onFeedError: (err, what) => logger.warn({ err: err instanceof Error ? err.message : String(err) }, what),
    }));
  let port = config.listenPort;
  const role = config.node.role;
  let node: LocalNode | undefined;
  let endpoint: NodeEndpoint | undefined;
  let connectors: Connectors | undefined;
  let app: ApiInstance | undefined;
  let metricsServer: HttpServer | undefined;
  let registration: NodeRegistration | undefined;
  // Issue #17: spans over OTLP only when OTEL_EXPORTER_OTLP_ENDPOINT is set (nothing loaded otherwise).
  await openTracing(process.env, logger);
  const events = new EventLog(store, logger);
  let webhooks: Webhooks | undefined;
  try {
    await events.start();
    // Issue #15 (docs/SCALE-OUT.md): a node runs units on this host; `--role api` runs none.
    if (role !== "api") {
      // Only whether it has an endpoint matters here (its port may be known only once it listens).
      const address = config.node.address ?? (config.node.listen ? "endpoint" : "");
      await NodeRegistration.check({ store, dataDir: config.dataDir, name: config.node.name, address });
      node = await openLocalNode({
        events: events.emit,
        config,
        store,
        log: logger,
        unitUrl: (unit) => unitUrl(config, port, unit.urlLabel),
        ...(opts.runtime && { runtime: opts.runtime }),
        ...(opts.sweepMs !== undefined && { sweepMs: opts.sweepMs }),
        ...(opts.signal && { signal: opts.signal }),
      });
      if (config.node.listen) {
        endpoint = await NodeEndpoint.listen({
          node,
          secret: config.node.secret ?? "",
          log: logger,
          ...config.node.listen,
        });
      }
      const listenHost = config.node.listen?.host ?? "";
      registration = await NodeRegistration.register({
        store,
        dataDir: config.dataDir,
        ...config.node,
        diskPath: config.poolDir ?? poolPaths(config.dataDir).path,
        address:
          config.node.address ??
          (endpoint ? `${listenHost.includes(":") ? `[${listenHost}]` : listenHost}:${endpoint.port}` : ""),
        version: serverVersion(),
        log: logger,
      });
    }
    const localNodeId = registration?.node.id;
    const directory = new NodeDirectory(
      store,
      node && localNodeId ? { id: localNodeId, node } : undefined,
      config.node.secret ?? "",
      { connectMs: config.agentConnectTimeoutMs, answerMs: config.agentAnswerTimeoutMs },
    );
    // A node is reachable from here when it is this process's, or has an endpoint that did not just fail.
    const placement = new NodePlacement(
      store,
      (n) => n.id === localNodeId || (n.address !== "" && !directory.recentlyUnreachable(n.id)),
      Date.now,
      Math.random,
      localNodeId,
    );
    const apiHost = ["0.0.0.0", "::"].includes(config.listenHost)
      ? "127.0.0.1"
      : config.listenHost.includes(":")
        ? `[${config.listenHost}]`
        : config.listenHost;
    connectors = await openConnectors({
      config,
      store,
      runtime: node?.runtime,
      log: logger,
      // Issue #15: a node without an API process beside it names the deployment's (--api-url).
      apiBase: () => config.apiUrl ?? `http://${apiHost}:${port}`,
    });
    webhooks = new Webhooks({
      store,
      events,
      keys: await Keys.load(config.dataDir),
      log: logger,
      allowPrivate: config.webhooksAllowPrivate,
    });
    // Deliveries are the API's work: a node only records events.
    if (role !== "node") webhooks.start();
    // Units reach the connector gateway on their own node.
    if (node) {
      const gatewayPort = await connectors.listen();
      await node.runtime.allowGatewayPort?.(gatewayPort);
    }
    if (role !== "node") {
      app = await buildApp({
        store,
        config,
        logger: logger as FastifyBaseLogger,
        node: directory,
        connectors,
        events,
        webhooks,
        placement,
        ...(opts.mcp && { mcp: opts.mcp }),
        ...(opts.consoleDir !== undefined && { consoleDir: opts.consoleDir }),
      });
    }
    // The files this start made (runtime id, keys, locks) are root's alone too.
    await secureDataDir(config.dataDir);
    await app?.listen({ host: config.listenHost, port: config.listenPort });
    if (config.metricsListen) metricsServer = await listenMetrics(config.metricsListen.host, config.metricsListen.port);
    registration?.start();
  } catch (err) {
    await registration?.close();
    webhooks?.close();
    await endpoint?.close().catch(() => {});
    await app?.close().catch(() => {});
    await node?.close().catch(() => {});
    await events.close();
    await connectors?.close();
    await closeTracing();
    if (!opts.store) await store.close();
    stopStallWatch();
    releaseHelper();
    throw err;
  }
  const listening = app?.server.address();
  // The API's port (units' URLs and the admin connector name it). A `--role node` process serves no
  // API: its units name the deployment's --listen port, which its API processes are taken to share.
  if (typeof listening === "object" && listening) port = listening.port;
  const shownPort = app ? port : (endpoint?.port ?? port);
  const listenHost = app ? config.listenHost : (config.node.listen?.host ?? config.listenHost);
  const host = listenHost.includes(":") ? `[${listenHost}]` : listenHost;
  const url = `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${shownPort}`;
  logger.info(
    {
      url,
      role,
      ...(app && { console: `${url}/console/` }),
      port: shownPort,
      ...(endpoint && { nodeEndpoint: config.node.address }),
      ...(node && { gatewayPort: connectors.gatewayPort() }),
      dialect: store.dialect,
      dataDir: config.dataDir,
    },
    role === "node" ? "ums node listening" : "ums listening",
  );
  // Issue #17: the process's metrics, and the sampler of running units' usage, whose memory and
  // disk limits reached become `limit.reached` events.
  const limitReached = limitReachedRecorder(store, events.emit);
  let sampler: UsageSampler | undefined;
  let logCap: AgentLogCap | undefined;
  let dropUnitSource = () => {};
  if (config.metrics) metrics.enableDefaults();
  if (config.metrics && node) {
    const lifecycle = node.lifecycle;
    dropUnitSource = metrics.addUnitSource(() => {
      let running = 0;
      let warm = 0;
      for (const t of lifecycle.tracked()) {
        if (t.status === "running") running++;
        else if (t.status === "warm") warm++;
      }
      return { running, warm };
    });
    const rt = node.runtime;
    if (rt.usageSources) {
      sampler = new UsageSampler({
        store: store.usage,
        running: () => lifecycle.runningIds(),
        sources: (id) => rt.usageSources?.(id),
        log: logger,
        ...(opts.usageIntervalMs !== undefined && { intervalMs: opts.usageIntervalMs }),
      });
      sampler.onLimitReached = (unitId, kind) => {
        opts.onLimitReached?.(unitId, kind);
        limitReached({ unitId, kind }).catch((err: unknown) =>
          logger.warn({ err, unitId, kind }, "recording a limit.reached event failed"),
        );
      };
      sampler.start();
    }
  }
  // A running unit's agent.log is cut at its cap (runtime/agent-log-cap.ts), metrics or not.
  const agentLog = node?.runtime.agentLog?.bind(node.runtime);
  if (node && agentLog) {
    const lifecycle = node.lifecycle;
    logCap = new AgentLogCap({
      running: () => lifecycle.runningIds(),
      path: agentLog,
      log: logger,
    });
    logCap.start();
  }
  const metricsAddress = metricsServer?.address();
  const metricsPort = typeof metricsAddress === "object" && metricsAddress ? metricsAddress.port : undefined;
  let closing: Promise<void> | undefined;
  const api = app;
  const cn = connectors;
  const hooks = webhooks as Webhooks;
  const local = node;
  const none = (what: string): never => {
    throw new Error(`this process has no ${what} (--role ${role})`);
  };
  return {
    url,
    port: shownPort,
    store,
    get node() {
      return local ?? none("node");
    },
    get runtime() {
      return local?.runtime ?? none("node");
    },
    get lifecycle() {
      return local?.lifecycle ?? none("node");
    },
    get egress() {
      return local?.egress ?? none("node");
    },
    get app() {
      return api ?? none("API");
    },
    nodeEndpointPort: endpoint?.port,
    gatewayPort: cn.gatewayPort(),
    events,
    limitReached,
    sampler,
    metricsPort,
    close() {
      // Units keep running when the server stops (docs/ARCHITECTURE.md section 8).
      closing ??= (async () => {
        try {
          await closeAll();
        } finally {
          stopStallWatch();
          releaseHelper();
        }
      })();
      return closing;
    },
  };
  async function closeAll(): Promise<void> {
    await registration?.close();
    await sampler?.stop();
    logCap?.stop();
    dropUnitSource();
    if (metricsServer) {
      metricsServer.closeAllConnections();
      await new Promise<void>((resolve) => metricsServer?.close(() => resolve()));
    }
    await cn.close();
    // Deliveries still waiting are lost (docs/EVENTS.md).
    hooks.close();
    await api?.close();
    await endpoint?.close();
    await local?.close();
    await events.close();
    await closeTracing();
    if (!opts.store) await store.close();
  }
}
