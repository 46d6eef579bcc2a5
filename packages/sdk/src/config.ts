import { AuthenticationError, SdkErrorCode, UmsError } from "./errors.js";

/** Where the server is and how to authenticate; every field falls back to the environment. */
export interface ConnectionOpts {
  /** Base URL of the server, e.g. `https://ums.example.com`. Default: env `UMS_URL`, else `http://127.0.0.1:7070`. */
  baseUrl?: string | undefined;
  /** API token (`ums token create` prints one). Default: env `UMS_TOKEN`. */
  token?: string | undefined;
  /** Default time limit of each request, in milliseconds; 0 means none. Default 30 000. */
  timeoutMs?: number | undefined;
  /** Extra headers sent with every request. */
  headers?: Readonly<Record<string, string>> | undefined;
  /** The fetch implementation to use (default: global `fetch`). */
  fetch?: typeof fetch | undefined;
}

/** Per-call options, accepted by every operation. */
export interface RequestOpts {
  /** Time limit of this request, in milliseconds; 0 means none. Default: the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
  /** Aborts the request; the rejection is the signal's reason, not a `TimeoutError`. */
  signal?: AbortSignal | undefined;
}

export const DEFAULT_BASE_URL = "http://127.0.0.1:7070";
export const DEFAULT_TIMEOUT_MS = 30_000;

/** `ConnectionOpts` resolved against the environment and defaults, validated once. */
export class ConnectionConfig {
  readonly baseUrl: string;
  readonly token: string;
  readonly timeoutMs: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly fetch: typeof fetch;

  constructor(opts: ConnectionOpts = {}, env: NodeJS.ProcessEnv = process.env) {
    this.baseUrl = normalizeBaseUrl(opts.baseUrl ?? (env.UMS_URL || DEFAULT_BASE_URL));
    const token = opts.token ?? env.UMS_TOKEN ?? "";
    if (token.trim() === "") {
      throw new AuthenticationError(
        "no API token: pass { token } or set UMS_TOKEN (create one with 'ums token create --org <slug>')",
        SdkErrorCode.NoToken,
      );
    }
    this.token = token.trim();
    this.timeoutMs = checkTimeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, "timeoutMs");
    this.headers = { ...opts.headers };
    this.fetch = opts.fetch ?? globalThis.fetch;
  }
}

function normalizeBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UmsError(`baseUrl '${value}' is not a URL like https://ums.example.com`, SdkErrorCode.InvalidConfig);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UmsError(`baseUrl '${value}' must use http or https`, SdkErrorCode.InvalidConfig);
  }
  if (url.search || url.hash) {
    throw new UmsError(`baseUrl '${value}' must not have a query or fragment`, SdkErrorCode.InvalidConfig);
  }
  // Keep a path prefix (a server mounted under /ums), without its trailing slash.
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

export function checkTimeout(value: number, what: string): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new UmsError(`${what} must be a number of milliseconds >= 0, got ${value}`, SdkErrorCode.InvalidConfig);
  }
  return value;
}
