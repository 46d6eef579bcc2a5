/**
 * Spec section 9: the API version is `<major>.<minor>.<patch>`; the environment
 * version (the unit image) is `v<major>.<minor>.<patch>-rc<N>`.
 */
export const API_VERSION = "0.1.0";
export const ENVIRONMENT_VERSION = "v0.1.0-rc1";

export const API_VERSION_PATTERN = "^\\d+\\.\\d+\\.\\d+$";
export const ENVIRONMENT_VERSION_PATTERN = "^v\\d+\\.\\d+\\.\\d+-rc\\d+$";

/** The versions a unit may be upgraded to: `latest` or an environment version this server knows. */
export const KNOWN_ENVIRONMENT_VERSIONS: readonly string[] = Object.freeze([ENVIRONMENT_VERSION]);
