export type {
  CheckpointEvent,
  CheckpointInfo,
  FsEntry,
  FsRenameResponse,
  FsWriteResponse,
  ImageRecipe,
  NetworkPolicy,
  NetworkRule,
  ServiceEvent,
  ServiceRequest,
  ServiceResponse,
  ServiceState,
} from "@ums/protocol";
export { ErrorCode } from "@ums/protocol/error-codes";
export {
  type CheckpointCreateOpts,
  type CheckpointRestoreOpts,
  Checkpoints,
  type RestoreResult,
} from "./checkpoints.js";
export { type ApiRequestOpts, type ClientOpts, encodePath, type HttpMethod, SDK_VERSION, UmsClient } from "./client.js";
export { type CommandResult, Commands, type RunOpts } from "./commands.js";
export {
  ConnectionConfig,
  type ConnectionOpts,
  DEFAULT_BASE_URL,
  DEFAULT_TIMEOUT_MS,
  type RequestOpts,
} from "./config.js";
export {
  AuthenticationError,
  ConflictError,
  ConnectionError,
  errorFromResponse,
  LimitError,
  NotFoundError,
  NotImplementedError,
  SdkErrorCode,
  ServerError,
  StreamError,
  TimeoutError,
  UmsError,
  type UmsErrorOpts,
  ValidationError,
} from "./errors.js";
export {
  EVENT_TYPES,
  type EventFilter,
  type EventFollowOpts,
  type EventInfo,
  type EventListOpts,
  type EventPage,
  Events,
  type EventType,
  type VerifyWebhookInput,
  verifyWebhook,
} from "./events.js";
export {
  type FileData,
  type FileListOpts,
  type FileReadOpts,
  type FileRemoveOpts,
  Files,
  type FilesOpts,
  type FileWriteOpts,
  HOME_DIR,
} from "./files.js";
export { type ImageImportOpts, type ImageInfo, Images } from "./images.js";
export { type NodeInfo, Nodes } from "./nodes.js";
export {
  type AuditEvent,
  type AuditLogOpts,
  auditLog,
  type Organization,
  type OrganizationOpts,
  organization,
} from "./organization.js";
export { type PageOf, paginate } from "./pagination.js";
export { Policies } from "./policies.js";
export { type ServiceLogsOpts, type ServiceStreamOpts, Services } from "./services.js";
export {
  ExecConnection,
  type KillEvent,
  type SessionInfo,
  type SessionOpenOpts,
  Sessions,
} from "./sessions.js";
export { type TemplateCreateOpts, type TemplateInfo, Templates } from "./templates.js";
export type { Tunnel, TunnelOpts } from "./tunnel.js";
export { Unit, type UnitCreateOpts, type UnitListOpts, type UnitOpts, type UnitPage } from "./unit.js";
export type {
  UnitHealth,
  UnitInfo,
  UnitStatus,
  UpgradeResult,
  UrlSettings,
  UrlSettingsUpdate,
} from "./unit-info.js";
export type { UnitUsage, UsageSample, UsageWindow } from "./usage.js";
