export { ErrorCode } from "@ums/protocol";
export { type ApiRequestOpts, type ClientOpts, encodePath, type HttpMethod, SDK_VERSION, UmsClient } from "./client.js";
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
  TimeoutError,
  UmsError,
  type UmsErrorOpts,
  ValidationError,
} from "./errors.js";
export { type Organization, type OrganizationOpts, organization } from "./organization.js";
export { type PageOf, paginate } from "./pagination.js";
export { Unit, type UnitCreateOpts, type UnitListOpts, type UnitOpts, type UnitPage } from "./unit.js";
export type {
  UnitHealth,
  UnitInfo,
  UnitStatus,
  UpgradeResult,
  UrlSettings,
  UrlSettingsUpdate,
} from "./unit-info.js";
