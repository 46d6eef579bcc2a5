import swagger from "@fastify/swagger";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import websocket from "@fastify/websocket";
import { Type } from "@sinclair/typebox";
import { API_VERSION, ENVIRONMENT_VERSION, ErrorBody, ErrorCode } from "@ums/protocol";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type HTTPMethods,
  LogController,
  type RouteOptions,
} from "fastify";
import type { ServerConfig } from "../config.js";
import { type Connectors, registerBrowserCallback, registerConnectorRoutes } from "../connectors/index.js";
import type { EventLog } from "../events/event-log.js";
import { eventRoutes } from "../events/routes.js";
import { webhookRoutes } from "../events/webhook-routes.js";
import type { Webhooks } from "../events/webhooks.js";
import { KEEP_ALIVE_MS, limitServer, serverOptions, watchBody } from "../http/limits.js";
import { metrics } from "../metrics/server-metrics.js";
import type { NodePlacement } from "../node/placement/node-placement.js";
import type { UnitNode } from "../node/unit-node.js";
import type { Store } from "../store/store.js";
import { addRequestSpans } from "../tracing/request-spans.js";
import { activeTracer } from "../tracing/tracing.js";
import { AuditRecorder } from "./audit/recorder.js";
import { auditRoutes } from "./audit/routes.js";
import { bearerAuth } from "./auth.js";
import { checkpointRoutes } from "./checkpoints/routes.js";
import { consoleSessionRoutes } from "./console/session.js";
import { consoleStaticRoutes } from "./console/static.js";
import { controlRoutes } from "./control/routes.js";
import { DIALECTS, UNIT_PREFIX } from "./dialect.js";
import { ApiError, sendError } from "./errors.js";
import { execRoutes } from "./exec/routes.js";
import { fsRoutes } from "./fs/routes.js";
import { imageRoutes } from "./images/routes.js";
import { ImageService } from "./images/service.js";
import type { ApiInstance } from "./instance.js";
import { type McpHandler, mcpRoutes } from "./mcp/routes.js";
import { nodeRoutes } from "./nodes/routes.js";
import { organizationRoutes } from "./organization/routes.js";
import { networkPolicyRoutes } from "./policies/network.js";
import { policyRoutes } from "./policies/routes.js";
import { proxyRoutes, unitRootUrl } from "./proxy/routes.js";
import { redactQuery } from "./redact.js";
import { lazySerializers } from "./serializers.js";
import { serviceRoutes } from "./services/routes.js";
import { templateRoutes } from "./templates/routes.js";
import { TemplateService } from "./templates/service.js";
import { TunnelCount } from "./tunnels/count.js";
import { tunnelRoutes } from "./tunnels/routes.js";
import { loadCookieKey } from "./unit-url/cookie.js";
import { FastPath } from "./unit-url/fast-path.js";
import { rewriteUnitHost, unitUrlRoutes } from "./unit-url/routes.js";
import { unitRoutes } from "./units/routes.js";
import { UnitService } from "./units/service.js";
import { usageRoutes } from "./usage/routes.js";
import { validatorCompiler } from "./validation.js";

/** How the server reaches itself: its listen address, or loopback when it listens on every address. */
function loopbackHost(listenHost: string): string {
  if (listenHost === "0.0.0.0" || listenHost === "") return "127.0.0.1";
  if (listenHost === "::") return "[::1]";
  return listenHost.includes(":") ? `[${listenHost}]` : listenHost;
}

/** The port the server listens on (the config may say 0: any free port). */
export function listenPort(app: ApiInstance, config: ServerConfig): number {
  const address = app.server.address();
  return typeof address === "object" && address ? address.port : config.listenPort;
}

export interface AppDeps {
  readonly store: Store;
  readonly config: ServerConfig;
  readonly logger: FastifyBaseLogger;
  /** The node the units run on: the API's only way to them (docs/ARCHITECTURE.md section 2). */
  readonly node: UnitNode;
  /** Connectors and OAuth (spec 4.8); the gateway itself listens on its own port. */
  readonly connectors?: Connectors;
  /** The MCP endpoint's handler (issue #13), given by `ums serve`; without it /v1/mcp is a 404. */
  readonly mcp?: McpHandler;
  /** The console's build (issue #14); default packages/console/dist (api/console/static.ts). */
  readonly consoleDir?: string;
  /** Issue #17: lifecycle events (GET /v1/events) and webhooks. */
  readonly events?: EventLog;
  readonly webhooks?: Webhooks;
  /** Issue #15: chooses a new unit's node; without it units name none (the OpenAPI document's app). */
  readonly placement?: NodePlacement;
}

const JSON_BODY_LIMIT = 1024 * 1024;

/** The compatibility prefix's routes are listed under their own tag in the OpenAPI document. */
function tagCompatRoute(route: RouteOptions): void {
  if (route.schema && !route.schema.hide) route.schema = { ...route.schema, tags: ["sprites"] };
}

/**
 * Issue #17: the Prometheus exposition, for admin tokens (any organization's: the series name no
 * organization and no unit). `--metrics-listen` serves it without a token on its own address.
 */
function metricsRoute(api: ApiInstance): void {
  api.get(
    "/metrics",
    {
      schema: {
        tags: ["observability"],
        summary:
          "Prometheus metrics of the server (text exposition format); an admin token only. `--metrics-listen` serves them on their own address without a token",
        response: {
          200: Type.String({ description: "text/plain; version=0.0.4" }),
          401: ErrorBody,
          403: ErrorBody,
        },
      },
    },
    async (req, reply) => {
      if (req.auth.token.role !== "admin") {
        throw new ApiError(403, ErrorCode.AdminRequired, "only an admin token reads the server's metrics");
      }
      reply.type(metrics.contentType);
      return metrics.exposition();
    },
  );
}

/** Builds the HTTP API. Routes are registered by feature; errors leave through `sendError` only. */
export async function buildApp(deps: AppDeps): Promise<ApiInstance> {
  const byHost = rewriteUnitHost(deps.config.unitHost);
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: JSON_BODY_LIMIT,
    // One log line per request, written by the onResponse hook below.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // Issue #20 part 3: what a slow client may hold (http/limits.ts, docs/SECURITY.md).
    keepAliveTimeout: KEEP_ALIVE_MS,
    requestTimeout: 0,
    http: serverOptions(deps.config.connectionLimits) as object,
    routerOptions: { maxParamLength: 512, ignoreTrailingSlash: true },
    // Host routing before anything else (spec 4.1): a request for a unit's URL,
    // `<name>-<random>.<unit_host>`, only ever reaches the unit URL route, never the API.
    rewriteUrl: (req) => byHost(req) ?? unitRootUrl(req.url ?? "/"),
    // Response serializers built at first use (serializers.ts); validators likewise (validation.ts).
    schemaController: { compilersFactory: { buildSerializer: lazySerializers } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  limitServer(app.server, deps.config.connectionLimits);
  const cookieKey = loadCookieKey(deps.config.dataDir);
  // Issue #16 part 2: requests to units' HTTP targets (unit URLs; reads through /v1/units/{name}/<path>
  // once the routes exist, below) forwarded without Node's HTTP objects (api/unit-url/fast-path.ts);
  // with tracing on, every request keeps its span on the API's own path.
  const tracing = activeTracer() !== undefined;
  const fast = tracing ? undefined : FastPath.install(app.server, { ...deps, cookieKey });
  if (!tracing && !fast) {
    deps.logger.warn("unit URL fast path not installed: the server's connection listener is not Node's alone");
  }
  const auth = bearerAuth(deps.store, deps.config.rateLimits);
  app.addHook("onRequest", async (req, reply) =>
    watchBody(req.raw, reply.raw, deps.config.connectionLimits.bodyIdleMs),
  );
  app.setValidatorCompiler(validatorCompiler);
  // The API speaks JSON only (fastify also parses text/plain by default).
  app.removeContentTypeParser("text/plain");
  // Many clients send Content-Type: application/json on requests without a body (DELETE): an
  // empty body is no body, not bad JSON. Non-empty bodies keep fastify's parser, which guards
  // against prototype poisoning.
  const jsonParser = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) =>
    body === "" ? done(null, undefined) : jsonParser(req, body as string, done),
  );
  // Issue #17: a span per request when tracing is on (tracing/), nothing otherwise.
  addRequestSpans(app as unknown as FastifyInstance);
  app.setErrorHandler((err, req, reply) => sendError(err, req, reply));
  app.setNotFoundHandler((req, reply) =>
    sendError(
      new ApiError(404, ErrorCode.RouteNotFound, `no route ${req.method} ${req.originalUrl.split("?")[0]}`),
      req,
      reply,
    ),
  );
  if (deps.config.metrics) {
    // Issue #17: one count and one duration per answered request, by route pattern (never the URL:
    // no unit name in a label). Synchronous, and fastify has timed the request already.
    app.addHook("onResponse", (req, reply, done) => {
      metrics.request(req.method, req.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });
  }
  app.addHook("onResponse", async (req, reply) => {
    req.log.info(
      {
        method: req.method,
        url: redactQuery(req.originalUrl),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
      },
      "request",
    );
  });

  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "ums — Unit Management Service",
        version: API_VERSION,
        description: `API version ${API_VERSION}; unit environment version ${ENVIRONMENT_VERSION}.`,
      },
      components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
      security: [{ bearer: [] }],
    },
  });

  app.get("/v1/openapi.json", { schema: { hide: true } }, async () => app.swagger());
  app.get("/healthz", { schema: { hide: true } }, async () => ({ ok: true }));

  await app.register(websocket, { options: { perMessageDeflate: false, maxPayload: 16 * 1024 * 1024 } });

  const node = deps.node;
  let port = 0;
  const units = new UnitService(
    deps.store,
    deps.config,
    () => (port ||= listenPort(app, deps.config)),
    node,
    deps.events?.emit,
    deps.placement,
  );
  const tunnels = new TunnelCount();
  await app.register(async (api) => {
    api.decorateRequest("auth", null as never);
    api.addHook("onRequest", auth.hook);
    const audit = new AuditRecorder(deps.store);
    api.addHook("onResponse", audit.onResponse);
    api.addHook("onRoute", audit.onRoute);
    organizationRoutes(api, deps.store);
    consoleSessionRoutes(api, deps.store, { httpsFront: deps.config.unitUrlScheme === "https" });
    auditRoutes(api, deps.store);
    if (deps.events) eventRoutes(api, deps.events);
    if (deps.webhooks) webhookRoutes(api, deps.webhooks);
    templateRoutes(api, new TemplateService(deps.store, units, node));
    imageRoutes(api, new ImageService(deps.store, node));
    if (deps.config.metrics) metricsRoute(api);
    nodeRoutes(api, deps.store);
    if (deps.mcp) {
      mcpRoutes(api, deps.mcp, () => {
        port ||= listenPort(app, deps.config);
        return `http://${loopbackHost(deps.config.listenHost)}:${port}`;
      });
    }
    if (deps.connectors) registerConnectorRoutes(api, deps.connectors);
    // Everything under a unit, once per dialect (api/dialect.ts).
    for (const dialect of DIALECTS) {
      await api.register(
        async (scope) => {
          if (dialect === "sprites") scope.addHook("onRoute", tagCompatRoute);
          unitRoutes(scope, { units, dialect });
          policyRoutes(scope, { units, node, dialect });
          networkPolicyRoutes(scope, { units, node, dialect });
          checkpointRoutes(scope, { store: deps.store, units, node, dialect });
          await scope.register(async (exec) => execRoutes(exec, { units, node, dialect }));
          await scope.register(async (fs) => fsRoutes(fs, { units, node, dialect }));
          controlRoutes(scope, { units, node, dialect, store: deps.store, tunnels });
          serviceRoutes(scope, { units, node, dialect });
          if (dialect === "units") usageRoutes(scope, { units, store: deps.store, sampling: deps.config.metrics });
          tunnelRoutes(scope, { units, node, dialect, tunnels });
          await scope.register(async (p) => proxyRoutes(p, { node, units, config: deps.config, dialect }));
        },
        { prefix: UNIT_PREFIX[dialect] },
      );
    }
  });
  const connectors = deps.connectors;
  if (connectors) await app.register(async (open) => registerBrowserCallback(open, connectors, deps.store));
  // Issue #14: the console's files, for anyone (the page signs in itself).
  await app.register(async (open) => consoleStaticRoutes(open, deps.consoleDir));
  // Issue #7: the gateway answers units on its own port; callers of the API are never units.
  app.all("/v1/gateway/*", { schema: { hide: true } }, async () => {
    throw new ApiError(401, ErrorCode.GatewayUnauthorized, "the gateway answers only units, at their gateway address");
  });
  await app.register(async (u) =>
    unitUrlRoutes(u, {
      node,
      store: deps.store,
      config: deps.config,
      cookieKey,
    }),
  );

  await app.ready();
  if (fast) {
    // Reads through /v1/units/{name}/<path> too: the route's own rules, decided as fastify routes them.
    fast.api = {
      auth,
      isProxyRoute: (method, path) => {
        const found = app.findRoute({ method: method as HTTPMethods, url: path });
        const params = found?.params as Record<string, unknown> | undefined;
        return params !== undefined && "*" in params && "name" in params;
      },
      log: (err) => deps.logger.warn({ err }, "token touch failed"),
    };
  }
  return app;
}
