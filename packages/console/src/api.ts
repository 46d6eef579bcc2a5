// Calls to the ums API with the console's session cookie: same origin only, the CSRF token on
// every state-changing call (the server refuses one without it).

let csrf = "";

export function setCsrf(token: string): void {
  csrf = token;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code = "",
  ) {
    super(message);
  }
}

/** Called when a call answers 401: the session ended (signed out elsewhere, expired). */
let onUnauthorized: () => void = () => {};
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

export function headers(method: string, extra: Record<string, string> = {}): Record<string, string> {
  return method === "GET" || method === "HEAD" ? extra : { ...extra, "X-UMS-CSRF": csrf };
}

async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => "");
  let message = text || res.statusText;
  let code = "";
  try {
    const body = JSON.parse(text) as { error?: string; errors?: string[]; code?: string };
    message = body.error ?? body.errors?.join("; ") ?? message;
    code = body.code ?? "";
  } catch {}
  if (res.status === 401) onUnauthorized();
  return new ApiError(res.status, message, code);
}

export interface CallOpts {
  body?: unknown;
  signal?: AbortSignal;
  query?: Record<string, string | number | boolean | readonly string[] | undefined>;
}

export function url(path: string, query: CallOpts["query"] = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) q.append(k, x);
    else q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export async function raw(method: string, path: string, opts: CallOpts = {}): Promise<Response> {
  const init: RequestInit = { method, headers: headers(method), signal: opts.signal, credentials: "same-origin" };
  if (opts.body !== undefined) {
    init.body = JSON.stringify(opts.body);
    init.headers = headers(method, { "Content-Type": "application/json" });
  }
  const res = await fetch(url(path, opts.query), init);
  if (!res.ok) throw await errorOf(res);
  return res;
}

export async function call<T>(method: string, path: string, opts: CallOpts = {}): Promise<T> {
  const res = await raw(method, path, opts);
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const get = <T>(path: string, opts?: CallOpts) => call<T>("GET", path, opts);

/** Reads an NDJSON stream, one event at a time; an `error` event throws. */
export async function ndjson(
  method: string,
  path: string,
  onEvent: (e: Record<string, unknown>) => void,
  opts: CallOpts = {},
): Promise<void> {
  const res = await raw(method, path, opts);
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let failure = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += value;
    let nl = buf.indexOf("\n");
    while (nl >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      nl = buf.indexOf("\n");
      if (!line) continue;
      const e = JSON.parse(line) as Record<string, unknown>;
      if (e.type === "error") failure = String(e.error ?? e.data ?? e.message ?? "failed");
      onEvent(e);
    }
  }
  if (failure) throw new ApiError(200, failure);
}

/** The unit's API path. */
export const unitPath = (name: string, rest = "") => `/v1/units/${encodeURIComponent(name)}${rest}`;

export interface Session {
  organization: string;
  csrf: string;
  /** The role of the token signed in with: `admin` or `member`. */
  role: string;
}

export interface Unit {
  name: string;
  url: string;
  status: "cold" | "warm" | "running";
  created_at: string;
  updated_at: string;
  last_running_at: string | null;
  last_warming_at: string | null;
  labels?: string[];
  url_settings: { auth: "unit" | "public"; private_access?: string } | null;
  config?: { ram_mb?: number; cpus?: number; storage_gb?: number };
  version: string | null;
  /** Issue #15: the node that holds it. */
  node?: string;
}

export interface UnitList {
  sprites: Unit[];
  has_more: boolean;
  next_continuation_token: string | null;
  running: number;
  warm: number;
  cold: number;
  name: string;
  running_limit?: number;
  warm_limit?: number;
}

export interface Checkpoint {
  id: string;
  create_time: string;
  comment: string;
  source_id?: string;
  health: string;
  active: boolean;
  is_auto: boolean;
}

export interface FsEntry {
  name: string;
  path: string;
  type: string;
  size: number;
  mode: string;
  modTime: string;
  isDir: boolean;
}

export interface ExecSession {
  id: number;
  command: string;
  created: string;
  is_active: boolean;
  last_activity: string;
  tty: boolean;
  workdir: string;
}

export interface Service {
  name: string;
  cmd: string;
  args: string[];
  needs: string[];
  dir?: string;
  env?: Record<string, string>;
  http_port?: number | null;
  state?: { status: string; pid?: number; started_at?: string; error?: string; restart_count: number } | null;
}

export interface NetworkRule {
  action?: string;
  domain?: string;
  include?: string;
}

export interface NetworkLog {
  denied_lookups: number;
  dropped_packets: number;
  decisions: { time: string; name: string; type: string; verdict: string; rule?: string; addresses?: string[] }[];
  dropped: { address: string; names: string[]; packets: number; last_time: string }[];
}

export interface AccessPolicy {
  allow_all?: boolean;
  allowed_endpoints?: string[];
  blocked_endpoints?: string[];
  name_prefix?: string;
  sprite_labels?: string[];
}

export interface Connection {
  id: string;
  provider: string;
  provider_account_id: string;
  provider_account_name?: string;
  connection_type?: string;
  access_policy?: AccessPolicy;
  scopes?: string;
}

export interface Provider {
  key: string;
  display_name: string;
  oauth: boolean;
  base_api_url_required: boolean;
}

/** Issue #18: an image units start from (`base`, the host's, or one the organization imported). */
export interface Image {
  id: string;
  name: string;
  /** `base` (the host's) or `imported`; any kind but `base` is the organization's own, deleted by it. */
  kind: string;
  version: string;
  bytes: number;
  source: string | null;
  config: { env: string[]; user: { name: string; uid: number; gid: number; home: string }; working_dir: string | null };
  created_at: string;
}

/** Issue #18: a checkpoint published as an organization template. */
export interface Template {
  id: string;
  name: string;
  description: string;
  source: { unit: string; checkpoint: string };
  environment_version: string | null;
  created_at: string;
}

export const listImages = (signal?: AbortSignal) =>
  get<{ images: Image[] }>("/v1/images", { signal }).then((r) => r.images);
export const listTemplates = (signal?: AbortSignal) =>
  get<{ templates: Template[] }>("/v1/templates", { signal }).then((r) => r.templates);

/** Issue #15: a host that runs units (`GET /v1/nodes`, admin tokens only). */
export interface Node {
  id: string;
  name: string;
  up: boolean;
  state: string;
  status: string;
  units: number;
  unit_slots: number | null;
  cpus: number;
  memory_bytes: number;
  memory_free_bytes: number;
  disk_bytes: number;
  disk_free_bytes: number;
  labels: Record<string, string>;
  version: string;
  started_at: string;
  heartbeat_at: string;
  heartbeat_age_seconds: number;
}

export const listNodes = (signal?: AbortSignal) => get<{ nodes: Node[] }>("/v1/nodes", { signal }).then((r) => r.nodes);
