import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IDEMPOTENT, isStaleConnection } from "@ums/protocol/retry";
import pino from "pino";
import type { McpHandler } from "../api/mcp/routes.js";
import { mintToken } from "../auth/tokens.js";
import { resolveConfig, type ServerConfig } from "../config.js";
import { readNodeId } from "../node/registry/registration.js";
import { unmountBelow } from "../runtime/storage/mounts.js";
import { type RunningServer, startServer } from "../start.js";
import type { OrgLimits, TokenRole } from "../store/records.js";
import { LogRing, recentAgentLogs, reportAgentTrouble } from "./agent-log-report.js";
import { type TestDialect, testDialects } from "./dialects.js";
import { openTestRuntime } from "./runtime.js";

/** A real ums server on a loopback port with a throwaway data dir and database. */
export interface TestServer {
  readonly url: string;
  readonly config: ServerConfig;
  readonly server: RunningServer;
  /** Creates the organization if needed and a token for it; returns the token. */
  token(org: string, opts?: { role?: TokenRole; limits?: Partial<OrgLimits> }): Promise<string>;
  /** fetch against the server with the bearer token (when given) and JSON body handling. */
  api(method: string, path: string, opts?: ApiOpts): Promise<ApiResponse>;
  /** Creates a unit named `name` with `token` (it fails unless answered 201); returns its id. */
  unit(token: string, name: string): Promise<string>;
  /** Stops the server as a `ums serve` stops: its units keep running (close() still cleans up). */
  stop(): Promise<void>;
  /** Starts it again after stop(), on the same data dir and runtime (a new port). */
  restart(): Promise<void>;
  close(): Promise<void>;
  /**
   * For a test's failure message: the server's recent warnings (kept unless UMS_TEST_LOG or a
   * logStream sends its log elsewhere) and the recent lines of its units' agent.log files.
   */
  diagnostics(): Promise<string>;
}

export interface ApiOpts {
  token?: string | undefined;
  json?: unknown;
  body?: string | Uint8Array;
  headers?: Record<string, string>;
  /** Fails the request after this long: a test must fail, not hang, when the API does. */
  timeoutMs?: number;
  /** fetch's redirect mode (default "follow"). */
  redirect?: "follow" | "manual" | "error";
}

export interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON shapes.
  readonly body: any;
}

export interface TestServerOpts {
  unitHost?: string;
  idleWarm?: string;
  idleCold?: string;
  sweepMs?: number;
  /**
   * The units' DNS upstream: a fake resolver the test started (see fake-internet.ts). Default: a
   * loopback port where nothing answers, so no test's lookup ever leaves the machine.
   */
  dnsUpstream?: string;
  gatewayPort?: number;
  /** A connectors config file (provider overrides pointing at fakes, platform keys). */
  connectorsConfig?: string;
  /** Every log line of the server, at debug level (tests grep it for secrets). */
  logStream?: NodeJS.WritableStream;
  /** An existing data dir to start on (a restart); it is the caller's: kept at close. */
  dataDir?: string;
  /** Rate limits per token and per organization (`100/s`, `off`, …); default: the server's defaults. */
  rateLimitToken?: string;
  rateLimitOrg?: string;
  /** How long a request head may take, and a body stall (`2s`, …); default: the server's. */
  headersTimeout?: string;
  bodyIdleTimeout?: string;
  /** A pool of the test's own (its path, and the image in it) instead of the shared test pool. */
  pool?: { path: string; imagePath: string };
  /** The handler of /v1/mcp (`ums serve` gives the real one; none: /v1/mcp is a 404). */
  mcp?: McpHandler;
  /** How clients reach the server (`https`: behind a TLS front); default http. */
  unitUrlScheme?: "http" | "https";
  /** The console's build directory (default packages/console/dist). */
  consoleDir?: string;
  /** Webhooks may target loopback (a receiver the test runs). */
  webhooksAllowPrivate?: boolean;
  /** Issue #17: false as with --no-metrics; how often units' usage is sampled; `--metrics-listen`. */
  metrics?: boolean;
  usageIntervalMs?: number;
  metricsListen?: string;
  /** Issue #15: `--object-store` (its credentials from the test process's environment). */
  objectStore?: string;
  /** Issue #15: `--local-checkpoints` (retention of stored checkpoints' snapshots). */
  localCheckpoints?: number;
  /**
   * Issue #15: one process of a deployment of several (docs/SCALE-OUT.md): its role, the
   * database the deployment shares (the caller's: not dropped at close), its node endpoint
   * (`--node-listen`), name and the shared node secret.
   */
  cluster?: {
    role: "all" | "api" | "node";
    databaseUrl: string;
    secret: string;
    nodeListen?: string;
    nodeAddress?: string;
    nodeName?: string;
  };
}

/** A test server on SQLite, for the suites that do not run on every dialect. */
export function startSqliteServer(overrides: TestServerOpts = {}): Promise<TestServer> {
  const sqlite = testDialects[0];
  if (sqlite?.name !== "sqlite") throw new Error("no sqlite dialect");
  return startTestServer(sqlite, overrides);
}

/** A test server on SQLite, a token of `org` and a unit named `unit` of it: the set-up of a suite on one unit. */
export async function startWithUnit(
  org: string,
  unit: string,
  overrides: TestServerOpts = {},
): Promise<{ s: TestServer; token: string }> {
  const s = await startSqliteServer(overrides);
  try {
    const token = await s.token(org);
    await s.unit(token, unit);
    return { s, token };
  } catch (err) {
    await s.close();
    throw err;
  }
}

export async function startTestServer(dialect: TestDialect, overrides: TestServerOpts = {}): Promise<TestServer> {
  const ownDir = overrides.dataDir === undefined;
  const dataDir = overrides.dataDir ?? (await mkdtemp(join(tmpdir(), "ums-test-")));
  const cluster = overrides.cluster;
  const db = cluster ? { databaseUrl: cluster.databaseUrl, drop: async () => {} } : await dialect.createDatabase();
  const config = resolveConfig(
    {
      dataDir,
      listen: "127.0.0.1:0",
      databaseUrl: db.databaseUrl,
      ...(cluster && {
        role: cluster.role,
        nodeListen: cluster.nodeListen,
        nodeAddress: cluster.nodeAddress,
        nodeName: cluster.nodeName,
      }),
      unitHost: overrides.unitHost,
      unitUrlScheme: overrides.unitUrlScheme,
      idleWarm: overrides.idleWarm,
      idleCold: overrides.idleCold,
      dnsUpstream: overrides.dnsUpstream ?? "127.0.0.1:9",
      gatewayPort: overrides.gatewayPort ?? 0,
      connectorsConfig: overrides.connectorsConfig,
      rateLimitToken: overrides.rateLimitToken,
      rateLimitOrg: overrides.rateLimitOrg,
      headersTimeout: overrides.headersTimeout,
      bodyIdleTimeout: overrides.bodyIdleTimeout,
      webhooksAllowPrivate: overrides.webhooksAllowPrivate,
      metrics: overrides.metrics,
      metricsListen: overrides.metricsListen,
      objectStore: overrides.objectStore,
      localCheckpoints: overrides.localCheckpoints,
    },
    cluster ? { UMS_NODE_SECRET: cluster.secret } : {},
  );
  /** The run dirs of its units (runtime/runc/unit-paths.ts `runRoot`). */
  const runRoot = join(dataDir, "run");
  // Without a log of its own, the server's warnings are kept for `diagnostics()`.
  const warnings = new LogRing();
  const logger = overrides.logStream
    ? pino({ level: "debug" }, overrides.logStream)
    : process.env.UMS_TEST_LOG
      ? pino({ level: process.env.UMS_TEST_LOG })
      : pino({ level: "warn" }, warnings);
  // An API process runs no units: no runtime.
  const rt =
    cluster?.role === "api"
      ? undefined
      : await openTestRuntime(dataDir, {
          gatewayPort: config.gatewayPort,
          unitDefaults: config.unitDefaults,
          ...(overrides.pool && { pool: overrides.pool }),
        });
  let server: RunningServer;
  const start = () =>
    startServer(config, {
      logger,
      ...(rt && { runtime: rt.runtime }),
      ...(overrides.sweepMs !== undefined && { sweepMs: overrides.sweepMs }),
      ...(overrides.mcp && { mcp: overrides.mcp }),
      ...(overrides.consoleDir !== undefined && { consoleDir: overrides.consoleDir }),
      ...(overrides.usageIntervalMs !== undefined && { usageIntervalMs: overrides.usageIntervalMs }),
    });
  try {
    server = await start();
  } catch (err) {
    // A start that failed (e.g. a port taken) leaves no firewall table, cgroup, lock or database.
    await rt?.release().catch(() => {});
    await db.drop().catch(() => {});
    if (ownDir) await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  const defaults = config.orgDefaults;
  /** What the node holds, read while its store is open (a stopped server's is closed). */
  const holdings = async () => {
    const nodeId = await readNodeId(dataDir);
    return {
      units: await server.store.units.withStatus(["cold", "warm", "running"], nodeId),
      templates: await server.store.templates.all(nodeId),
      images: await server.store.images.all(nodeId),
    };
  };
  let stopped: Awaited<ReturnType<typeof holdings>> | undefined;

  return {
    get url() {
      return server.url;
    },
    config,
    get server() {
      return server;
    },
    async stop() {
      if (stopped) return;
      stopped = rt ? await holdings() : { units: [], templates: [], images: [] };
      await server.close();
    },
    async restart() {
      if (!stopped) throw new Error("restart() follows stop()");
      server = await start();
      stopped = undefined;
    },
    async token(slug, opts = {}) {
      const org = await server.store.orgs.ensure(slug, defaults);
      if (opts.limits) await server.store.orgs.setLimits(slug, opts.limits);
      const { secret } = await mintToken(server.store.tokens, {
        orgId: org.id,
        name: "test",
        role: opts.role ?? "admin",
      });
      return secret;
    },
    api: (method, path, opts) => apiRequest(server.url, method, path, opts),
    async unit(token, name) {
      const r = await apiRequest(server.url, "POST", "/v1/units", { token, json: { name } });
      if (r.status !== 201) throw new Error(`creating unit '${name}': ${r.status} ${r.text}`);
      return r.body.id;
    },
    async diagnostics() {
      const logged = warnings.recent();
      return [`server warnings (${logged.length}):`, ...logged, await recentAgentLogs(runRoot)].join("\n");
    },
    async close() {
      if (!rt) {
        await server.close();
        if (ownDir) await rm(dataDir, { recursive: true, force: true });
        return;
      }
      // Every unit this server (node) made goes, with all its host resources.
      const { units, templates, images } = stopped ?? (await holdings());
      await server.close();
      await reportAgentTrouble(
        runRoot,
        units.map((u) => u.id),
      );
      const failures: unknown[] = [];
      for (const u of units) {
        await rt.runtime
          .destroy(u.id)
          .then(() => rt.runtime.forget(u.id))
          .catch((err) => failures.push(err));
      }
      // What it kept of units that moved to another node (issue #15), and those nodes' own.
      for (const id of await rt.runtime.retired().catch(() => [] as string[])) {
        await rt.runtime
          .destroy(id)
          .then(() => rt.runtime.forget(id))
          .catch((err) => failures.push(err));
      }
      for (const t of templates) await rt.runtime.deleteTemplate(t.id).catch((err) => failures.push(err));
      for (const i of images) await rt.runtime.deleteImage(i.id).catch((err) => failures.push(err));
      // A safety net for what a failed destroy may have left mounted in the run dirs.
      await unmountBelow(runRoot).catch((err) => failures.push(err));
      await rt.release();
      await db.drop();
      if (ownDir) await rm(dataDir, { recursive: true, force: true });
      if (failures.length > 0) throw new AggregateError(failures, "test server cleanup failed");
    },
  };
}

/** A request to the API at `base` with the bearer token (when given) and JSON body handling. */
export async function apiRequest(base: string, method: string, path: string, opts: ApiOpts = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Uint8Array | undefined = opts.body;
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers["content-type"] ??= "application/json";
  }
  const started = performance.now();
  const send = () =>
    fetch(base + path, {
      method,
      headers,
      ...(body !== undefined && { body }),
      ...(opts.redirect && { redirect: opts.redirect }),
      ...(opts.timeoutMs !== undefined && { signal: AbortSignal.timeout(opts.timeoutMs) }),
    });
  // As the SDK: an idempotent request that met a kept-alive connection the server was closing is
  // sent once more (a CI run's GET failed so, 30 s after the connection's last request).
  const res = await send().catch((err) => {
    if (IDEMPOTENT.has(method) && isStaleConnection(err)) return send();
    throw err;
  });
  const text = await readText(res, `${method} ${path}`, started);
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

/**
 * The answer's body as text. A body cut short (its timeout, the server's connection gone) fails
 * naming the request and what had come of it: a streamed answer's progress lines say where the
 * server stopped.
 */
async function readText(res: Response, what: string, started: number): Promise<string> {
  const chunks: Uint8Array[] = [];
  // As `res.text()`: UTF-8, a byte order mark dropped.
  const text = () => new TextDecoder().decode(Buffer.concat(chunks));
  try {
    for await (const chunk of res.body ?? []) chunks.push(chunk);
  } catch (err) {
    const got = text();
    const ms = Math.round(performance.now() - started);
    throw new Error(
      `${what}: the answer (${res.status}) was cut after ${ms} ms (${err instanceof Error ? err.message : String(err)}); it had said: ${JSON.stringify(got.length > 4000 ? `…${got.slice(-4000)}` : got)}`,
      { cause: err },
    );
  }
  return text();
}
