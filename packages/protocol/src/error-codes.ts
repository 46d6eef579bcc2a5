import { FS_RESERVED_PATH } from "./fs-reserved.js";

/**
 * Stable, machine-readable error codes (fastify style: a fixed prefix, never reused).
 * Every error body carries one of these in `code`; clients branch on it, never on the message.
 */
export const ErrorCode = {
  /** 400: the request failed schema or semantic validation; `errors` lists each bad field. */
  Validation: "UMS_VALIDATION",
  /** 400: the body is not valid JSON. */
  BadJson: "UMS_BAD_JSON",
  /** 401: no bearer token, or one that is unknown or revoked. */
  Unauthorized: "UMS_UNAUTHORIZED",
  /** 408: the request's body stalled (nothing arrived for too long while the server waited for it). */
  RequestTimeout: "UMS_REQUEST_TIMEOUT",
  /** 401: the token had an expiry and it has passed; mint a new one. */
  TokenExpired: "UMS_TOKEN_EXPIRED",
  /** 403: the organization's limit forbids the operation. */
  LimitReached: "UMS_LIMIT_REACHED",
  /** 404: no such route. */
  RouteNotFound: "UMS_ROUTE_NOT_FOUND",
  /** 404: no unit of that name in the caller's organization. */
  UnitNotFound: "UMS_UNIT_NOT_FOUND",
  /** 405: the route exists but not with this method. */
  MethodNotAllowed: "UMS_METHOD_NOT_ALLOWED",
  /** 404: the unit has no checkpoint of that id (checkpoints belong to the unit they were taken of). */
  CheckpointNotFound: "UMS_CHECKPOINT_NOT_FOUND",
  /** 404: no template of that name in the caller's organization (issue #18). */
  TemplateNotFound: "UMS_TEMPLATE_NOT_FOUND",
  /** 409: a template of that name already exists in the organization; delete it or choose another name. */
  TemplateExists: "UMS_TEMPLATE_EXISTS",
  /** 404: no image of that name for the caller's organization (issue #18). */
  ImageNotFound: "UMS_IMAGE_NOT_FOUND",
  /** 409: the name is the host's `base`, an import's name is taken (without `replace`), or a build of it is under way. */
  ImageExists: "UMS_IMAGE_EXISTS",
  /**
   * 409: `upgrade` would drop what the unit changed in its system files (packages it installed,
   * /etc it edited); the message lists the paths (docs/IMAGES.md "Upgrading a unit").
   */
  UpgradeRefused: "UMS_UPGRADE_REFUSED",
  /** 409: units created from the image still use it (its config); delete them first. */
  ImageInUse: "UMS_IMAGE_IN_USE",
  /** 400: the image archive cannot be imported, or a recipe's step failed; the message says what to fix. */
  ImageInvalid: "UMS_IMAGE_INVALID",
  /** 409: the checkpoint the unit is on cannot be deleted. */
  CheckpointActive: "UMS_CHECKPOINT_ACTIVE",
  /** 404: no exec session with that id in the unit. */
  SessionNotFound: "UMS_SESSION_NOT_FOUND",
  /**
   * 409: the unit holds as many exec sessions that outlive their websocket (TTY sessions, detachable
   * ones, a `max_run_after_disconnect`) as its agent allows; end one first (kill, or exit it).
   */
  SessionLimit: "UMS_SESSION_LIMIT",
  /** 409: the organization runs as many busy units as its running_limit allows. */
  RunningLimit: "UMS_RUNNING_LIMIT",
  /** 502: the unit could not be started or its agent did not answer. */
  UnitUnavailable: "UMS_UNIT_UNAVAILABLE",
  /** 409: a unit of that name already exists in the organization. */
  UnitExists: "UMS_UNIT_EXISTS",
  /** 413: the body is larger than the route accepts. */
  PayloadTooLarge: "UMS_PAYLOAD_TOO_LARGE",
  /** 415: the body's content type is not one the route accepts. */
  UnsupportedMediaType: "UMS_UNSUPPORTED_MEDIA_TYPE",
  /** 501: the route is part of the interface but not served by this server yet. */
  NotImplemented: "UMS_NOT_IMPLEMENTED",
  /**
   * 507: the host's unit pool (the btrfs filesystem holding every unit's disk and checkpoints) is
   * full: delete checkpoints or units, or grow the pool. Nothing was changed.
   */
  PoolFull: "UMS_POOL_FULL",
  /**
   * 503: no node can take the unit now (issue #15): every node is down, cordoned, draining, full or
   * short of memory or disk; the message counts each. Nothing was created; try again, or the operator
   * adds or uncordons a node.
   */
  NoNode: "UMS_NO_NODE",
  /** 409: the unit is in use (a request, a session or a keep-awake task holds it), so it cannot move now (issue #15). */
  UnitBusy: "UMS_UNIT_BUSY",
  /** 503: the unit is moving to another node (issue #15); try again in a few seconds. */
  UnitMoving: "UMS_UNIT_MOVING",
  /** 404: no node of that name (issue #15); `GET /v1/nodes` lists them. */
  NodeNotFound: "UMS_NODE_NOT_FOUND",
  /** 500: a fault of the server; the message never carries internal details. */
  Internal: "UMS_INTERNAL",
  /** 502: the unit runs but nothing listens on its HTTP target port. */
  UnitNoListener: "UMS_UNIT_NO_LISTENER",
  /** 504: the unit's HTTP target did not answer in time. */
  UnitTimeout: "UMS_UNIT_TIMEOUT",
  /** 502: the connection to the unit's HTTP target failed before it answered. */
  UnitProxyFailed: "UMS_UNIT_PROXY_FAILED",
  /** 403: the token is valid but may not reach this unit URL (url_settings.private_access). */
  Forbidden: "UMS_FORBIDDEN",
  /**
   * 403: the filesystem API does not reach into the unit's /.unit (ums's own), asked for or through a
   * symlink; /.unit/logs, /.unit/checkpoints and /.unit/policy can be read (fs-reserved.ts).
   */
  FsReservedPath: FS_RESERVED_PATH,
  /** 404: the unit has no service of that name. */
  ServiceNotFound: "UMS_SERVICE_NOT_FOUND",
  /** 409: another service of the unit already claims that `http_port`. */
  ServicePortTaken: "UMS_SERVICE_PORT_TAKEN",
  /** 409: the service is needed by others (delete or change those first). */
  ServiceNeeded: "UMS_SERVICE_NEEDED",
  /** 409: the service has no running process to signal. */
  ServiceNotRunning: "UMS_SERVICE_NOT_RUNNING",
  /** 404: no keep-awake task of that name in the unit. */
  TaskNotFound: "UMS_TASK_NOT_FOUND",
  /** 400: a network policy rule is malformed, names an unknown preset or an unknown action. */
  NetworkPolicyInvalid: "UMS_NETWORK_POLICY_INVALID",
  /** 404: no connector with that id in the organization. */
  ConnectionNotFound: "UMS_CONNECTION_NOT_FOUND",
  /** 404: no provider with that key in the registry. */
  ProviderNotFound: "UMS_PROVIDER_NOT_FOUND",
  /** 403: the connector's access policy does not let this unit make this call (spec 2.11). */
  ConnectorPolicyDenied: "UMS_CONNECTOR_POLICY_DENIED",
  /** 401: the gateway is reachable only from units, at their gateway address. */
  GatewayUnauthorized: "UMS_GATEWAY_UNAUTHORIZED",
  /** 502: the provider could not be reached, or refreshing the connector's token failed. */
  ProviderFailed: "UMS_PROVIDER_FAILED",
  /**
   * 504: the unit's agent did not answer in time (stopped, traced or overloaded); the unit is marked
   * unhealthy (spec 2.4) and the next request restarts it.
   */
  AgentTimeout: "UMS_AGENT_TIMEOUT",
  /**
   * Control websocket (`op.error`): the client broke the envelope protocol (a malformed envelope, an
   * op.start while one runs, a data frame with no op); `error` names the problem.
   */
  ControlProtocol: "UMS_CONTROL_PROTOCOL",
  /** Control websocket (`op.error`): the op.start names no operation this server runs. */
  ControlUnknownOp: "UMS_CONTROL_UNKNOWN_OP",
  /**
   * 404: the organization in the path is not the calling token's (whether it exists is not said:
   * a token reaches its own organization only).
   */
  OrganizationNotFound: "UMS_ORGANIZATION_NOT_FOUND",
  /** 403: the route is for the organization's admin tokens; the calling token is a member token. */
  AdminRequired: "UMS_ADMIN_REQUIRED",
  /** 404: the organization has no live token with that id. */
  TokenNotFound: "UMS_TOKEN_NOT_FOUND",
  /** 409: the token is the organization's last live admin token; revoking it would leave no way to mint tokens over the API. */
  LastAdminToken: "UMS_LAST_ADMIN_TOKEN",
  /** 429: the token or its organization sent more requests than its rate limit allows; `Retry-After` says when to come back. */
  RateLimited: "UMS_RATE_LIMITED",
  /** 429: the unit has as many open websockets (exec sessions, watches) as one unit may have; close one first. */
  WebsocketLimit: "UMS_WEBSOCKET_LIMIT",
  /** 429: the unit has as many open TCP tunnels (`/proxy`) as one unit may have; close one first. */
  TunnelLimit: "UMS_TUNNEL_LIMIT",
  /** 502: nothing listens at the address and port a tunnel (`/proxy`) was to connect to, in the unit. */
  TunnelRefused: "UMS_TUNNEL_REFUSED",
  /** 502: the host a tunnel (`/proxy`) was to connect to did not resolve, was unreachable or did not answer in time. */
  TunnelUnreachable: "UMS_TUNNEL_UNREACHABLE",
  /** 429: the organization has as many event follows (`GET /v1/events?follow=true`) open as it may; close one first. */
  EventFollowLimit: "UMS_EVENT_FOLLOW_LIMIT",
  /** 400: a webhook's URL leads to a loopback, private or otherwise non-public address (the server does not allow those). */
  WebhookTargetRefused: "UMS_WEBHOOK_TARGET_REFUSED",
  /** 404: the organization has no webhook with that id. */
  WebhookNotFound: "UMS_WEBHOOK_NOT_FOUND",
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The codes the in-unit agent answers with: on its host socket (to ums serve, which passes the codes
 * of a 4xx on to the caller) and on the unit's internal API socket (to processes in the unit, spec
 * 4.7). Most are `ErrorCode`s; two are the agent's own. Dependency-free, for the agent's bundle.
 */
export const AgentErrorCode = {
  Validation: ErrorCode.Validation,
  BadJson: ErrorCode.BadJson,
  Internal: ErrorCode.Internal,
  RouteNotFound: ErrorCode.RouteNotFound,
  SessionNotFound: ErrorCode.SessionNotFound,
  SessionLimit: ErrorCode.SessionLimit,
  ServiceNotFound: ErrorCode.ServiceNotFound,
  ServicePortTaken: ErrorCode.ServicePortTaken,
  ServiceNeeded: ErrorCode.ServiceNeeded,
  ServiceNotRunning: ErrorCode.ServiceNotRunning,
  FsReservedPath: ErrorCode.FsReservedPath,
  TunnelRefused: ErrorCode.TunnelRefused,
  TunnelUnreachable: ErrorCode.TunnelUnreachable,
  /** 404: the agent has no route (HTTP or websocket) for the request. */
  NotFound: "UMS_NOT_FOUND",
  /** 502, internal API socket: ums serve could not be reached over the unit's host socket. */
  HostUnreachable: "UMS_UNAVAILABLE",
} as const;
export type AgentErrorCode = (typeof AgentErrorCode)[keyof typeof AgentErrorCode];
