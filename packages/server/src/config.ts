import { isIP } from "node:net";
import { hostname } from "node:os";
import { resolve } from "node:path";
import { parseDuration } from "@ums/protocol/duration";
import { DEFAULT_AGENT_TIMEOUTS } from "./agent/deadline.js";
import { parseRateLimit, type RateLimit } from "./api/rate-limit/token-bucket.js";
import { type ConnectionLimits, DEFAULT_CONNECTION_LIMITS } from "./http/limits.js";
import { KEY_PREFIX_PATTERN } from "./replication/keys.js";

/** Server configuration, resolved once from flags, then environment, then defaults; frozen. */
export interface ServerConfig {
  readonly dataDir: string;
  readonly listenHost: string;
  readonly listenPort: number;
  /** Units are reached at `<name>-<random>.<unitHost>`. */
  readonly unitHost: string;
  /** Scheme and port of unit URLs as clients see them (behind a TLS front: https, 443). */
  readonly unitUrlScheme: "http" | "https";
  /** Undefined: the port the server actually listens on. */
  readonly unitUrlPort: number | undefined;
  readonly databaseUrl: string | undefined;
  /** A block device for the btrfs pool; undefined: a loop file `<dataDir>/pool.img`. */
  readonly poolDevice: string | undefined;
  /** An already mounted btrfs filesystem to use as the pool instead (e.g. shared by test servers). */
  readonly poolDir: string | undefined;
  /** The base image units start from: `full` (default) or the small `test` image. */
  readonly imageVariant: "full" | "test";
  /** Idle running units are paused (warm) after this long; warm units stopped (cold) after `idleColdMs`. */
  readonly idleWarmMs: number;
  readonly idleColdMs: number;
  /** IPv4 range that units' /30 links are carved from. */
  readonly unitSubnet: string;
  /** The resolver units' allowed lookups are forwarded to (`HOST` or `HOST:PORT`); undefined: the host's (/etc/resolv.conf). */
  readonly dnsUpstream: string | undefined;
  /** When set, units reach only these public IPv4 ranges (CIDRs; empty: none). Tests and benches confine them. */
  readonly egressRanges: readonly string[] | undefined;
  /** Interfaces replies to units arrive on (ums turns forwarding on there); undefined: those of the default routes. */
  readonly uplinks: readonly string[] | undefined;
  /** The connector gateway's port on 0.0.0.0, reached by units at their gateway address, `ums.internal` (0: any free port). */
  readonly gatewayPort: number;
  /**
   * Issue #15: where this process's units' `sprites_admin` connector reaches the ums API (`--api-url`,
   * e.g. the deployment's load balancer); undefined: an API process on this host, at the --listen port.
   */
  readonly apiUrl: string | undefined;
  /** A JSON file of provider overrides and platform keys for connectors (README "Connectors"). */
  readonly connectorsConfig: string | undefined;
  /** Limits a unit gets where its resources policy names none (spec 4.5; README "Limits"). */
  readonly unitDefaults: { readonly pids: number; readonly cpuCores: number; readonly diskMb: number };
  /**
   * How long the host waits on a unit's agent: to connect to its socket, then for its first answer
   * (a response head, a websocket's 101). A unit whose agent misses one is unhealthy and restarted
   * by the next request (spec 2.4). Streams after the first answer are not bounded.
   */
  readonly agentConnectTimeoutMs: number;
  readonly agentAnswerTimeoutMs: number;
  /**
   * Requests per token and per organization (issue #20 part 5; README "Limits"): a caller over
   * either gets 429 with Retry-After.
   */
  readonly rateLimits: { readonly token: RateLimit; readonly org: RateLimit };
  /** How long a request head may take, and how long a body may stall (http/limits.ts). */
  readonly connectionLimits: ConnectionLimits;
  /** Issue #17: Prometheus metrics (`/metrics`) and the per-unit usage sampler; off with `--no-metrics`. */
  readonly metrics: boolean;
  /** Where `/metrics` is also served, without a token (`--metrics-listen HOST:PORT`). */
  readonly metricsListen: { readonly host: string; readonly port: number } | undefined;
  /** Limits given to organizations when they are created. */
  readonly orgDefaults: { readonly maxUnits: number; readonly runningLimit: number; readonly warmLimit: number };
  /** Issue #17: webhooks may target loopback and private addresses (`--webhooks-allow-private`). */
  readonly webhooksAllowPrivate: boolean;
  /**
   * Issue #15: how this host registers as a node (docs/SCALE-OUT.md): its name (unique among the
   * nodes of the database; default the host name), its labels (`key=value`, matched by placement),
   * and the most units it holds (undefined: no count limit, only memory and disk).
   */
  readonly node: {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly unitSlots: number | undefined;
    /**
     * What this process is (`--role`): `all` (the API and a node: the single-host default), `api`
     * (the API only: units run on nodes reached over their endpoints) or `node` (units only).
     */
    readonly role: ServerRole;
    /** Where the node endpoint listens for API processes (`--node-listen HOST:PORT`); undefined: nowhere. */
    readonly listen: { readonly host: string; readonly port: number } | undefined;
    /** `host:port` API processes reach that endpoint at (`--node-address`; default the listen address, made at start for port 0). */
    readonly address: string | undefined;
    /** The deployment's shared node secret (UMS_NODE_SECRET, environment only): API and nodes prove themselves with it. */
    readonly secret: string | undefined;
  };
  /**
   * Issue #15: the S3-compatible store checkpoints are copied to (`--object-store`); undefined:
   * none. Its credentials are read from the environment when it opens, never kept here.
   */
  readonly objectStore: ObjectStoreConfig | undefined;
  /**
   * Issue #15 retention (`--local-checkpoints N`, docs/SCALE-OUT.md): with an object store, a node
   * keeps the snapshots of each unit's N newest checkpoints and evicts older ones once the store
   * holds them; undefined: every snapshot stays on the node.
   */
  readonly localCheckpoints: number | undefined;
}

/** `s3://BUCKET[/PREFIX/][?endpoint=URL&region=R&path_style=true]`, parsed. */
export interface ObjectStoreConfig {
  readonly bucket: string;
  /** Keys go under it: `[a-z0-9_-]` segments, each ending in `/`; "" for none. */
  readonly keyPrefix: string;
  /** undefined: AWS's own endpoint for the region. */
  readonly endpoint: string | undefined;
  readonly region: string;
  readonly forcePathStyle: boolean;
}

export interface ConfigInput {
  dataDir?: string | undefined;
  listen?: string | undefined;
  unitHost?: string | undefined;
  unitUrlScheme?: string | undefined;
  unitUrlPort?: string | number | undefined;
  databaseUrl?: string | undefined;
  poolDevice?: string | undefined;
  poolDir?: string | undefined;
  imageVariant?: string | undefined;
  idleWarm?: string | undefined;
  idleCold?: string | undefined;
  unitSubnet?: string | undefined;
  gatewayPort?: string | number | undefined;
  apiUrl?: string | undefined;
  dnsUpstream?: string | undefined;
  egressRanges?: string | undefined;
  uplinks?: string | undefined;
  connectorsConfig?: string | undefined;
  unitPids?: string | number | undefined;
  unitCpu?: string | number | undefined;
  unitDiskMb?: string | number | undefined;
  agentConnectTimeout?: string | undefined;
  agentAnswerTimeout?: string | undefined;
  rateLimitToken?: string | undefined;
  rateLimitOrg?: string | undefined;
  headersTimeout?: string | undefined;
  bodyIdleTimeout?: string | undefined;
  webhooksAllowPrivate?: boolean | undefined;
  nodeName?: string | undefined;
  nodeLabels?: string | undefined;
  nodeUnitSlots?: string | number | undefined;
  role?: string | undefined;
  nodeListen?: string | undefined;
  nodeAddress?: string | undefined;
  objectStore?: string | undefined;
  localCheckpoints?: string | number | undefined;
  /** false: `--no-metrics`. */
  metrics?: boolean | undefined;
  metricsListen?: string | undefined;
}

export class ConfigError extends Error {}

export const DEFAULT_LISTEN = "127.0.0.1:7070";
export const DEFAULT_UNIT_HOST = "units.localhost";

/** `HOST:PORT`, `[v6]:PORT` or `:PORT`. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value.trim());
  const port = Number(m?.[3]);
  if (!m || !Number.isInteger(port) || port > 65535) {
    throw new ConfigError(`listen address '${value}' is not HOST:PORT (e.g. 127.0.0.1:7070 or [::1]:7070)`);
  }
  const host = m[1] ?? (m[2] || "0.0.0.0");
  if (m[1] && isIP(m[1]) !== 6) throw new ConfigError(`'${m[1]}' in '${value}' is not an IPv6 address`);
  return { host, port };
}

/** One label of a DNS name (RFC 1123): the unit host's, a node's name. */
const DNS_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

function parseUnitHost(value: string): string {
  const host = value.trim().toLowerCase().replace(/\.$/, "");
  if (!host || host.length > 200 || !host.split(".").every((l) => DNS_LABEL.test(l))) {
    throw new ConfigError(`unit host '${value}' is not a DNS name like units.example.com`);
  }
  return host;
}

function duration(flag: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === null) throw new ConfigError(`--${flag} '${text}' is not a duration like 30s, 10m or 1h`);
  return ms;
}

/** A duration from 100 ms to 10 minutes: a wait on a unit's agent. */
function agentTimeout(flag: string, text: string | undefined, dflt: number): number {
  if (text === undefined || text === "") return dflt;
  const ms = duration(flag, text);
  if (ms < 100 || ms > 600_000) throw new ConfigError(`--${flag} '${text}' must be from 100ms to 10m`);
  return ms;
}

/** A duration from 1 s to 1 h: how long a client may take (http/limits.ts). */
function limitTimeout(flag: string, text: string | undefined, dflt: number): number {
  if (text === undefined || text === "") return dflt;
  const ms = duration(flag, text);
  if (ms < 1_000 || ms > 3_600_000) throw new ConfigError(`--${flag} '${text}' must be from 1s to 1h`);
  return ms;
}

function port(flag: string, raw: string | number): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535)
    throw new ConfigError(`--${flag} '${raw}' must be an integer from 1 to 65535`);
  return n;
}

/** `HOST`, `HOST:PORT` or `[v6]:PORT` of a DNS server; the port defaults to 53. */
export function parseDnsServer(value: string): { host: string; port: number } {
  const v = value.trim();
  if (isIP(v)) return { host: v, port: 53 };
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(v);
  const host = m?.[1] ?? m?.[2];
  if (!m || !host || !isIP(host)) {
    throw new ConfigError(
      `DNS upstream '${value}' is not an IP address with an optional port (e.g. 9.9.9.9 or 127.0.0.1:5353)`,
    );
  }
  return { host, port: port("dns-upstream", m[3] ?? "") };
}

function imageVariant(v: string): "full" | "test" {
  if (v !== "full" && v !== "test") throw new ConfigError(`image variant '${v}' must be full or test`);
  return v;
}

/** `none` or a comma-separated list of IPv4 CIDRs. */
function egressRanges(v: string | undefined): readonly string[] | undefined {
  if (v === undefined) return undefined;
  if (v.trim() === "none") return Object.freeze([]);
  const list = v.split(",").map((c) => c.trim());
  for (const c of list) {
    const m = /^(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})$/.exec(c);
    if (!m || isIP(m[1] ?? "") !== 4 || Number(m[2]) > 32) {
      throw new ConfigError(`egress range '${c}' is not an IPv4 CIDR like 203.0.113.0/24 (or give 'none')`);
    }
  }
  return Object.freeze(list);
}

/** `none` or a comma-separated list of interface names. */
function uplinks(v: string | undefined): readonly string[] | undefined {
  if (v === undefined) return undefined;
  if (v.trim() === "none") return Object.freeze([]);
  const list = v.split(",").map((c) => c.trim());
  for (const dev of list) {
    if (!/^[\w.-]{1,15}$/.test(dev)) throw new ConfigError(`uplink '${dev}' is not an interface name (or give 'none')`);
  }
  return Object.freeze(list);
}

function dnsUpstream(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  parseDnsServer(v);
  return v.trim();
}
function gatewayPort(raw: string | number): number {
  const port = Number(raw);
  if (raw === "" || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`gateway port '${raw}' must be an integer from 0 to 65535`);
  }
  return port;
}

/** `--api-url`: an http(s) URL of the ums API (a path prefix is kept), without credentials, query or fragment. */
function apiUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === "") return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`--api-url '${raw}' is not a URL (e.g. https://ums.example.com)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(`--api-url '${raw}' must be http:// or https://`);
  }
  if (url.username || url.password) {
    throw new ConfigError("--api-url must not carry a user name or password (the connector sends its own token)");
  }
  if (url.search || url.hash) throw new ConfigError(`--api-url '${raw}' must not have a ?query or #fragment`);
  return url.href.replace(/\/+$/, "");
}

export const DEFAULT_GATEWAY_PORT = 7071;
/** Per token and per organization: far above what a person or an agent loop sends, low enough to stop a runaway client. */
export const DEFAULT_RATE_LIMIT_TOKEN = "500/s";
export const DEFAULT_RATE_LIMIT_ORG = "1000/s";

function rateLimit(flag: string, text: string): RateLimit {
  const limit = parseRateLimit(text);
  if (!limit) throw new ConfigError(`--${flag} '${text}' is not a rate like 100 or 100/s, 600/m, or off`);
  return limit;
}
/** Sized for a dev machine: a build's parallel jobs fit, a fork bomb stops early (issue #19). */
export const DEFAULT_UNIT_PIDS = 1024;
/** One core per unit: a busy unit cannot take the whole host (CFS quota). */
export const DEFAULT_UNIT_CPU = 1;

/** What a unit may write where its resources policy sets none: 10 GiB (a btrfs simple-quota group). */
export const DEFAULT_UNIT_DISK_MB = 10240;

function unitDiskMb(raw: string | number): number {
  const n = Number(raw);
  if (raw === "" || !Number.isInteger(n) || n < 128 || n > 16777216) {
    throw new ConfigError(`unit disk size '${raw}' must be a number of MiB from 128 to 16777216, like 10240`);
  }
  return n;
}

function unitPids(raw: string | number): number {
  const n = Number(raw);
  if (raw === "" || !Number.isInteger(n) || n < 16 || n > 1048576) {
    throw new ConfigError(`unit pids limit '${raw}' must be an integer from 16 to 1048576`);
  }
  return n;
}

/** Cores as a decimal (0.5, 1, 2); whether the host has them is checked when the runtime opens. */
function unitCpu(raw: string | number): number {
  const n = Number(raw);
  if (raw === "" || !Number.isFinite(n) || n < 0.01 || n > 1024) {
    throw new ConfigError(`unit CPU limit '${raw}' must be a number of cores from 0.01 to 1024, like 0.5 or 2`);
  }
  return n;
}

function metricsOn(flag: boolean | undefined, env: string | undefined): boolean {
  if (flag !== undefined) return flag;
  if (env === undefined || env === "") return true;
  if (env === "on" || env === "1" || env === "true") return true;
  if (env === "off" || env === "0" || env === "false") return false;
  throw new ConfigError(`UMS_METRICS '${env}' must be on or off`);
}

function metricsListen(v: string | undefined): { host: string; port: number } | undefined {
  if (v === undefined) return undefined;
  const l = parseListen(v);
  if (l.port === 0) throw new ConfigError(`--metrics-listen '${v}' needs a port`);
  return Object.freeze(l);
}

/** A node's name: a DNS label (1-63 of a-z, 0-9, -), as host names are. */
export function nodeNameProblem(name: string): string | undefined {
  return DNS_LABEL.test(name)
    ? undefined
    : "must be 1-63 lowercase letters, digits and '-', not starting or ending with '-'";
}

export type ServerRole = "all" | "api" | "node";

/** The smallest node secret taken (UMS_NODE_SECRET): guessing it must not be an option. */
export const MIN_NODE_SECRET = 32;

/** Issue #15: --role, --node-listen, --node-address and UMS_NODE_SECRET, checked together. */
function nodeRole(
  input: { role?: string | undefined; nodeListen?: string | undefined; nodeAddress?: string | undefined },
  env: NodeJS.ProcessEnv,
  databaseUrl: string | undefined,
): Pick<ServerConfig["node"], "role" | "listen" | "address" | "secret"> {
  const role = input.role ?? (env.UMS_ROLE || "all");
  if (role !== "all" && role !== "api" && role !== "node") {
    throw new ConfigError(`--role '${role}' is not one of all, api, node`);
  }
  if (role !== "all" && !databaseUrl) {
    throw new ConfigError(`--role ${role} needs PostgreSQL (--database-url): API processes and nodes share it`);
  }
  const listenText = input.nodeListen ?? (env.UMS_NODE_LISTEN || undefined);
  const listen = listenText === undefined ? undefined : parseListen(listenText);
  if (role === "node" && !listen) {
    throw new ConfigError("--role node needs --node-listen HOST:PORT (where API processes reach this node)");
  }
  if (role === "api" && listen) throw new ConfigError("--node-listen is for a node; --role api runs none");
  const secret = env.UMS_NODE_SECRET || undefined;
  if ((role !== "all" || listen) && (!secret || secret.length < MIN_NODE_SECRET)) {
    throw new ConfigError(
      `--role ${role}${listen ? " with --node-listen" : ""} needs UMS_NODE_SECRET in the environment: the same secret of at least ${MIN_NODE_SECRET} characters for the API processes and every node (e.g. openssl rand -hex 32)`,
    );
  }
  let address = input.nodeAddress ?? (env.UMS_NODE_ADDRESS || undefined);
  if (address !== undefined) {
    const a = parseListen(address);
    if (a.port === 0 || a.host === "0.0.0.0" || a.host === "::") {
      throw new ConfigError(`--node-address '${address}' must be a HOST:PORT API processes can connect to`);
    }
  } else if (listen && listen.port !== 0) {
    // Port 0 (tests): the address is made once the endpoint listens.
    if (listen.host === "0.0.0.0" || listen.host === "::") {
      throw new ConfigError(
        `--node-listen '${listenText}' listens on every address: give --node-address HOST:PORT, the one API processes connect to`,
      );
    }
    address = `${listen.host.includes(":") ? `[${listen.host}]` : listen.host}:${listen.port}`;
  }
  return { role, listen: listen && Object.freeze(listen), address, secret };
}

function nodeName(v: string): string {
  const name = v.trim().toLowerCase();
  const problem = nodeNameProblem(name);
  if (problem) throw new ConfigError(`node name '${v}' ${problem} (set it with --node-name)`);
  return name;
}

const LABEL_KEY = /^[a-z0-9](?:[a-z0-9._/-]{0,61}[a-z0-9])?$/;
const LABEL_VALUE = /^[A-Za-z0-9._-]{0,63}$/;

/** `key=value,key=value` (keys like `zone` or `example.com/gpu`; values may be empty); empty text: none. */
export function parseNodeLabels(v: string): Readonly<Record<string, string>> {
  const labels: Record<string, string> = {};
  for (const part of v.split(",")) {
    const item = part.trim();
    if (item === "") continue;
    const eq = item.indexOf("=");
    const key = eq < 0 ? item : item.slice(0, eq);
    const value = eq < 0 ? "" : item.slice(eq + 1);
    if (eq < 0 || !LABEL_KEY.test(key) || !LABEL_VALUE.test(value)) {
      throw new ConfigError(
        `node label '${item}' is not key=value (a key of a-z, 0-9, '.', '/', '-'; a value of up to 63 letters, digits, '.', '_', '-')`,
      );
    }
    if (key in labels) throw new ConfigError(`node label '${key}' is given twice`);
    labels[key] = value;
  }
  return Object.freeze(labels);
}

/** The default node name: the host name's first label, made a DNS label ("node" if nothing is left). */
export function defaultNodeName(host: string = hostname()): string {
  const label = (host.split(".")[0] ?? "")
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .slice(0, 63)
    .replace(/^-+|-+$/g, "");
  return label || "node";
}

function nodeUnitSlots(raw: string | number | undefined): number | undefined {
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 1_000_000) {
    throw new ConfigError(
      `--node-units '${raw}' must be an integer from 1 to 1000000 (the most units this node holds)`,
    );
  }
  return n;
}

/** `--local-checkpoints N`: a whole number from 1, and only where checkpoints are stored elsewhere. */
function localCheckpoints(
  raw: string | number | undefined,
  objectStore: ObjectStoreConfig | undefined,
): number | undefined {
  if (raw === undefined || raw === "") return undefined;
  const n = typeof raw === "number" ? raw : /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new ConfigError(
      `--local-checkpoints '${raw}' must be a whole number from 1 (how many of each unit's newest checkpoints stay on the node)`,
    );
  }
  if (!objectStore) {
    throw new ConfigError(
      "--local-checkpoints needs --object-store: a node evicts only checkpoints the object store holds (without one, every checkpoint stays on the node)",
    );
  }
  return n;
}

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** `s3://BUCKET[/PREFIX/][?endpoint=URL&region=R&path_style=true]` (docs/SCALE-OUT.md). */
export function parseObjectStore(text: string): ObjectStoreConfig {
  const bad = (why: string) =>
    new ConfigError(
      `object store '${text}' ${why}; give s3://BUCKET[/PREFIX/][?endpoint=URL&region=REGION&path_style=true]`,
    );
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw bad("is not a URL");
  }
  if (url.protocol !== "s3:") throw bad("is not an s3:// URL");
  if (url.username || url.password)
    throw bad("must not carry credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
  const bucket = url.hostname;
  if (!BUCKET.test(bucket)) throw bad(`names bucket '${bucket}', which is not 3-63 of a-z, 0-9, '.', '-'`);
  let keyPrefix = decodeURIComponent(url.pathname.replace(/^\//, ""));
  if (keyPrefix !== "" && !keyPrefix.endsWith("/")) keyPrefix += "/";
  if (!KEY_PREFIX_PATTERN.test(keyPrefix)) throw bad(`has prefix '${keyPrefix}', which is not [a-z0-9_-] segments`);
  const known = new Set(["endpoint", "region", "path_style"]);
  for (const k of url.searchParams.keys()) if (!known.has(k)) throw bad(`has an unknown option '${k}'`);
  const endpoint = url.searchParams.get("endpoint") ?? undefined;
  if (endpoint !== undefined) {
    let e: URL;
    try {
      e = new URL(endpoint);
    } catch {
      throw bad(`has endpoint '${endpoint}', which is not a URL`);
    }
    if (e.protocol !== "http:" && e.protocol !== "https:") throw bad(`has endpoint '${endpoint}', not http(s)`);
  }
  const pathStyle = url.searchParams.get("path_style") ?? (endpoint === undefined ? "false" : "true");
  if (!["true", "false", "1", "0"].includes(pathStyle)) throw bad(`has path_style '${pathStyle}', not true or false`);
  const region = url.searchParams.get("region") ?? "us-east-1";
  if (!/^[a-z0-9-]{1,32}$/.test(region)) throw bad(`has region '${region}', not like eu-west-1`);
  return Object.freeze({
    bucket,
    keyPrefix,
    endpoint,
    region,
    forcePathStyle: pathStyle === "true" || pathStyle === "1",
  });
}

export function resolveConfig(input: ConfigInput, env: NodeJS.ProcessEnv = process.env): ServerConfig {
  const listen = parseListen(input.listen ?? env.UMS_LISTEN ?? DEFAULT_LISTEN);
  const scheme = (input.unitUrlScheme ?? env.UMS_UNIT_URL_SCHEME ?? "http").toLowerCase();
  if (scheme !== "http" && scheme !== "https") {
    throw new ConfigError(`unit URL scheme '${scheme}' must be http or https`);
  }
  const rawPort = input.unitUrlPort ?? env.UMS_UNIT_URL_PORT;
  const unitUrlPort = rawPort === undefined || rawPort === "" ? undefined : Number(rawPort);
  if (unitUrlPort !== undefined && (!Number.isInteger(unitUrlPort) || unitUrlPort < 1 || unitUrlPort > 65535)) {
    throw new ConfigError(`unit URL port '${rawPort}' must be an integer from 1 to 65535`);
  }
  return Object.freeze({
    dataDir: resolve(input.dataDir ?? env.UMS_DATA_DIR ?? "./data"),
    listenHost: listen.host,
    listenPort: listen.port,
    unitHost: parseUnitHost(input.unitHost ?? env.UMS_UNIT_HOST ?? DEFAULT_UNIT_HOST),
    unitUrlScheme: scheme,
    unitUrlPort,
    databaseUrl: input.databaseUrl ?? (env.UMS_DATABASE_URL || undefined),
    poolDevice: input.poolDevice ?? (env.UMS_POOL_DEVICE || undefined),
    poolDir: input.poolDir ?? (env.UMS_POOL_DIR || undefined),
    imageVariant: imageVariant(input.imageVariant ?? env.UMS_IMAGE_VARIANT ?? "full"),
    idleWarmMs: duration("idle-warm", input.idleWarm ?? env.UMS_IDLE_WARM ?? "30s"),
    idleColdMs: duration("idle-cold", input.idleCold ?? env.UMS_IDLE_COLD ?? "10m"),
    unitSubnet: input.unitSubnet ?? env.UMS_UNIT_SUBNET ?? "10.209.0.0/16",
    dnsUpstream: dnsUpstream(input.dnsUpstream ?? (env.UMS_DNS_UPSTREAM || undefined)),
    egressRanges: egressRanges(input.egressRanges ?? (env.UMS_EGRESS_RANGES || undefined)),
    uplinks: uplinks(input.uplinks ?? (env.UMS_UPLINKS || undefined)),
    gatewayPort: gatewayPort(input.gatewayPort ?? env.UMS_GATEWAY_PORT ?? DEFAULT_GATEWAY_PORT),
    apiUrl: apiUrl(input.apiUrl ?? (env.UMS_API_URL || undefined)),
    connectorsConfig: input.connectorsConfig ?? (env.UMS_CONNECTORS_CONFIG || undefined),
    unitDefaults: Object.freeze({
      pids: unitPids(input.unitPids ?? env.UMS_UNIT_PIDS ?? DEFAULT_UNIT_PIDS),
      cpuCores: unitCpu(input.unitCpu ?? env.UMS_UNIT_CPU ?? DEFAULT_UNIT_CPU),
      diskMb: unitDiskMb(input.unitDiskMb ?? env.UMS_UNIT_DISK_MB ?? DEFAULT_UNIT_DISK_MB),
    }),
    agentConnectTimeoutMs: agentTimeout(
      "agent-connect-timeout",
      input.agentConnectTimeout ?? env.UMS_AGENT_CONNECT_TIMEOUT,
      DEFAULT_AGENT_TIMEOUTS.connectMs,
    ),
    agentAnswerTimeoutMs: agentTimeout(
      "agent-answer-timeout",
      input.agentAnswerTimeout ?? env.UMS_AGENT_ANSWER_TIMEOUT,
      DEFAULT_AGENT_TIMEOUTS.answerMs,
    ),
    rateLimits: Object.freeze({
      token: rateLimit(
        "rate-limit-token",
        input.rateLimitToken ?? env.UMS_RATE_LIMIT_TOKEN ?? DEFAULT_RATE_LIMIT_TOKEN,
      ),
      org: rateLimit("rate-limit-org", input.rateLimitOrg ?? env.UMS_RATE_LIMIT_ORG ?? DEFAULT_RATE_LIMIT_ORG),
    }),
    connectionLimits: Object.freeze({
      headersTimeoutMs: limitTimeout(
        "headers-timeout",
        input.headersTimeout ?? env.UMS_HEADERS_TIMEOUT,
        DEFAULT_CONNECTION_LIMITS.headersTimeoutMs,
      ),
      bodyIdleMs: limitTimeout(
        "body-idle-timeout",
        input.bodyIdleTimeout ?? env.UMS_BODY_IDLE_TIMEOUT,
        DEFAULT_CONNECTION_LIMITS.bodyIdleMs,
      ),
    }),
    metrics: metricsOn(input.metrics, env.UMS_METRICS),
    metricsListen: metricsListen(input.metricsListen ?? (env.UMS_METRICS_LISTEN || undefined)),
    orgDefaults: Object.freeze({ maxUnits: 1000, runningLimit: 10, warmLimit: 20 }),
    webhooksAllowPrivate:
      input.webhooksAllowPrivate ?? ["1", "true", "yes"].includes(env.UMS_WEBHOOKS_ALLOW_PRIVATE ?? ""),
    node: Object.freeze({
      name: nodeName(input.nodeName ?? (env.UMS_NODE_NAME || defaultNodeName())),
      labels: parseNodeLabels(input.nodeLabels ?? env.UMS_NODE_LABELS ?? ""),
      unitSlots: nodeUnitSlots(input.nodeUnitSlots ?? env.UMS_NODE_UNITS),
      ...nodeRole(input, env, input.databaseUrl ?? (env.UMS_DATABASE_URL || undefined)),
    }),
    ...(() => {
      const v = input.objectStore ?? (env.UMS_OBJECT_STORE || undefined);
      const objectStore = v === undefined ? undefined : parseObjectStore(v);
      return {
        objectStore,
        localCheckpoints: localCheckpoints(input.localCheckpoints ?? env.UMS_LOCAL_CHECKPOINTS, objectStore),
      };
    })(),
  });
}
