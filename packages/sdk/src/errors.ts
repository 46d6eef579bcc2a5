import { ErrorCode } from "@ums/protocol/error-codes";

/**
 * Codes for failures the SDK detects itself, before or instead of a server answer. They share the
 * `UMS_` prefix of the server's codes (`ErrorCode` in @ums/protocol) but never collide with them.
 */
export const SdkErrorCode = {
  /** The request did not finish within `timeoutMs`. */
  Timeout: "UMS_SDK_TIMEOUT",
  /** The server could not be reached (refused, reset, DNS, TLS). */
  Connection: "UMS_SDK_CONNECTION",
  /** The server answered with something that is not the API's JSON. */
  BadResponse: "UMS_SDK_BAD_RESPONSE",
  /** No token was given and UMS_TOKEN is not set. */
  NoToken: "UMS_SDK_NO_TOKEN",
  /** A client option is invalid (e.g. `baseUrl` is not a URL). */
  InvalidConfig: "UMS_SDK_INVALID_CONFIG",
  /** A list response said `has_more` but gave no usable `next_continuation_token`. */
  BadContinuation: "UMS_SDK_BAD_CONTINUATION",
  /** An NDJSON stream reported an `error` event (spec 6.1, 6.4) or ended without its final event. */
  StreamFailed: "UMS_SDK_STREAM_FAILED",
  /** A command run for `makeDir` (which has no endpoint of its own) failed. */
  CommandFailed: "UMS_SDK_COMMAND_FAILED",
} as const;
export type SdkErrorCode = (typeof SdkErrorCode)[keyof typeof SdkErrorCode];

export interface UmsErrorOpts {
  /** HTTP status of the server's answer; undefined when the SDK failed before getting one. */
  status?: number | undefined;
  /** Validation problems, one line per bad field (server 400 bodies). */
  errors?: readonly string[] | undefined;
  /** The path a filesystem error is about (fs errors carry it, docs/ARCHITECTURE.md section 10). */
  path?: string | undefined;
  cause?: unknown;
}

/**
 * Base of every error the SDK throws. Branch on the class or on `code` (stable), never on the
 * message (meant for people).
 */
export class UmsError extends Error {
  /** HTTP status, or undefined for failures detected in the SDK (timeouts, unreachable server). */
  readonly status: number | undefined;
  /** The server's `code` (`ErrorCode`, e.g. `UMS_UNIT_NOT_FOUND`) or an `SdkErrorCode`. */
  readonly code: string;
  /** The server's list of validation problems, when it sent one. */
  readonly errors: readonly string[] | undefined;
  /** For filesystem errors (`code` an errno name such as `ENOENT`): the path, as resolved in the unit. */
  readonly path: string | undefined;

  constructor(message: string, code: string, opts: UmsErrorOpts = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.status = opts.status;
    this.errors = opts.errors;
    this.path = opts.path;
  }
}

/** 401: the token is missing, unknown or revoked; or no token was configured. */
export class AuthenticationError extends UmsError {}

/** 404: no such unit in the token's organization (`UMS_UNIT_NOT_FOUND`) or no such route. */
export class NotFoundError extends UmsError {}

/** 409: a unit of that name already exists in the organization. */
export class ConflictError extends UmsError {}

/** 403: an organization limit (e.g. `max_sprites`) or a disabled organization forbids the operation. */
export class LimitError extends UmsError {}

/** 400: the request was invalid; `errors` names each bad field, e.g. `name: must be ...`. */
export class ValidationError extends UmsError {
  declare readonly errors: readonly string[];

  constructor(message: string, code: string, opts: UmsErrorOpts = {}) {
    super(message, code, { ...opts, errors: opts.errors ?? [message] });
  }
}

/** 5xx: a fault of the server (or of a proxy in front of it). */
export class ServerError extends UmsError {}

/** 501: the operation is part of the interface but this server does not serve it yet. */
export class NotImplementedError extends ServerError {}

/** The request did not complete within its `timeoutMs`. */
export class TimeoutError extends UmsError {}

/** The server could not be reached at all. */
export class ConnectionError extends UmsError {}

/**
 * A stream (checkpoint, restore, service start/stop/restart/logs) answered 200 and then failed:
 * its `error` event (spec 7: "a stream that fails mid-way reports an error event"), or it ended
 * without its final event. `event` is the error event as received, when there was one.
 */
export class StreamError extends UmsError {
  readonly event: Readonly<Record<string, unknown>> | undefined;

  constructor(message: string, event?: Readonly<Record<string, unknown>>, opts: UmsErrorOpts = {}) {
    super(message, SdkErrorCode.StreamFailed, opts);
    this.event = event;
  }
}

// Each class's `name` is its own, on its prototype as for the built-in errors (not read from the
// constructor: a minifier renames classes).
const CLASSES = {
  UmsError,
  AuthenticationError,
  NotFoundError,
  ConflictError,
  LimitError,
  ValidationError,
  ServerError,
  NotImplementedError,
  TimeoutError,
  ConnectionError,
  StreamError,
};
for (const [name, Class] of Object.entries(CLASSES)) {
  Object.defineProperty(Class.prototype, "name", { value: name, writable: true, configurable: true });
}

type ErrorClass = new (message: string, code: string, opts?: UmsErrorOpts) => UmsError;

/**
 * Every server code, each to its class; a code wins over the status. `null`: the status decides (the
 * code is answered with more than one status). The type makes a new `ErrorCode` fail to compile until
 * it has its place here.
 */
const BY_CODE: Readonly<Record<ErrorCode, ErrorClass | null>> = {
  [ErrorCode.Validation]: ValidationError,
  [ErrorCode.BadJson]: ValidationError,
  [ErrorCode.NetworkPolicyInvalid]: ValidationError,
  [ErrorCode.Unauthorized]: AuthenticationError,
  [ErrorCode.GatewayUnauthorized]: AuthenticationError,
  [ErrorCode.LimitReached]: LimitError,
  [ErrorCode.Forbidden]: UmsError,
  [ErrorCode.FsReservedPath]: UmsError,
  [ErrorCode.ConnectorPolicyDenied]: UmsError,
  [ErrorCode.RouteNotFound]: NotFoundError,
  [ErrorCode.UnitNotFound]: NotFoundError,
  [ErrorCode.CheckpointNotFound]: NotFoundError,
  [ErrorCode.TemplateNotFound]: NotFoundError,
  [ErrorCode.ImageNotFound]: NotFoundError,
  [ErrorCode.ImageInvalid]: ValidationError,
  [ErrorCode.SessionNotFound]: NotFoundError,
  [ErrorCode.ServiceNotFound]: NotFoundError,
  [ErrorCode.TaskNotFound]: NotFoundError,
  [ErrorCode.ConnectionNotFound]: NotFoundError,
  [ErrorCode.ProviderNotFound]: NotFoundError,
  [ErrorCode.OrganizationNotFound]: NotFoundError,
  [ErrorCode.TokenNotFound]: NotFoundError,
  [ErrorCode.AdminRequired]: UmsError,
  [ErrorCode.LastAdminToken]: ConflictError,
  [ErrorCode.MethodNotAllowed]: UmsError,
  [ErrorCode.UnitExists]: ConflictError,
  [ErrorCode.TemplateExists]: ConflictError,
  [ErrorCode.ImageExists]: ConflictError,
  [ErrorCode.ImageInUse]: ConflictError,
  [ErrorCode.UpgradeRefused]: ConflictError,
  [ErrorCode.CheckpointActive]: ConflictError,
  [ErrorCode.RunningLimit]: ConflictError,
  [ErrorCode.SessionLimit]: ConflictError,
  [ErrorCode.ServicePortTaken]: ConflictError,
  [ErrorCode.ServiceNeeded]: ConflictError,
  [ErrorCode.ServiceNotRunning]: ConflictError,
  [ErrorCode.PayloadTooLarge]: UmsError,
  [ErrorCode.UnsupportedMediaType]: UmsError,
  [ErrorCode.NotImplemented]: NotImplementedError,
  [ErrorCode.PoolFull]: ServerError,
  [ErrorCode.NoNode]: ServerError,
  [ErrorCode.UnitBusy]: ConflictError,
  [ErrorCode.UnitMoving]: ServerError,
  [ErrorCode.Internal]: ServerError,
  [ErrorCode.UnitNoListener]: ServerError,
  [ErrorCode.UnitProxyFailed]: ServerError,
  [ErrorCode.UnitTimeout]: ServerError,
  [ErrorCode.AgentTimeout]: ServerError,
  [ErrorCode.TunnelLimit]: UmsError,
  [ErrorCode.TokenExpired]: AuthenticationError,
  [ErrorCode.RequestTimeout]: TimeoutError,
  [ErrorCode.RateLimited]: UmsError,
  [ErrorCode.WebsocketLimit]: UmsError,
  [ErrorCode.TunnelRefused]: ServerError,
  [ErrorCode.TunnelUnreachable]: ServerError,
  [ErrorCode.ProviderFailed]: null, // 400 from an OAuth callback, 502 from the gateway
  [ErrorCode.UnitUnavailable]: null, // 502, or the 4xx of an agent answer that carried no code
  [ErrorCode.ControlProtocol]: ValidationError, // op.error on the control websocket
  [ErrorCode.ControlUnknownOp]: ValidationError,
  [ErrorCode.EventFollowLimit]: UmsError,
  [ErrorCode.WebhookTargetRefused]: ValidationError,
  [ErrorCode.WebhookNotFound]: NotFoundError,
  [ErrorCode.NodeNotFound]: NotFoundError,
};

/** For answers without a known code (e.g. from a proxy in front of the server). */
function classForStatus(status: number): ErrorClass {
  if (status === 400) return ValidationError;
  if (status === 401) return AuthenticationError;
  if (status === 404) return NotFoundError;
  if (status === 409) return ConflictError;
  if (status === 501) return NotImplementedError;
  if (status >= 500) return ServerError;
  return UmsError;
}

/**
 * Turns a non-2xx answer into an error. `body` is the parsed JSON (`{error, code}` or
 * `{errors, code}`, spec section 7), or undefined when the body was not JSON; `text` is the raw body.
 */
export function errorFromResponse(status: number, statusText: string, body: unknown, text: string): UmsError {
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const code = typeof b.code === "string" && b.code !== "" ? b.code : `HTTP_${status}`;
  const errors =
    Array.isArray(b.errors) && b.errors.every((e) => typeof e === "string") ? (b.errors as string[]) : undefined;
  let message: string;
  if (typeof b.error === "string" && b.error !== "") message = b.error;
  else if (errors && errors.length > 0) message = errors.join("; ");
  else {
    const snippet = text.trim().slice(0, 200);
    message = `HTTP ${status}${statusText ? ` ${statusText}` : ""}${snippet ? `: ${snippet}` : ""}`;
  }
  const path = typeof b.path === "string" ? b.path : undefined;
  const Class = BY_CODE[code as ErrorCode] ?? classForStatus(status);
  return new Class(message, code, { status, errors, path });
}
