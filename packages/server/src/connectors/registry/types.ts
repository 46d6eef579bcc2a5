/**
 * A provider of the connector registry (issue #7): where its API is, how a credential is applied
 * to a request, and its OAuth endpoints when it has them. Pure data; every URL can be overridden
 * by server configuration (connectors config, see README).
 */
export type CredentialAuth =
  /** `Authorization: Bearer <secret>` (RFC 6750). */
  | { readonly kind: "bearer" }
  /** A custom header carrying the secret, e.g. `x-api-key`. */
  | { readonly kind: "header"; readonly name: string }
  /** RFC 7617 basic auth; the api key is `user:password` (or the key as user, empty password). */
  | { readonly kind: "basic" }
  /** AWS Signature Version 4; the api key is `<access key id>:<secret access key>[:<region>]`. */
  | { readonly kind: "sigv4"; readonly service: string; readonly region: string };

export interface OAuthEndpoints {
  readonly authorizeUrl: string;
  readonly tokenUrl: string;
  readonly defaultScopes: readonly string[];
  /** How scopes are joined in the authorize URL (RFC 6749 §3.3 says space; a few use commas). */
  readonly scopeSeparator: " " | ",";
}

export interface ProviderDef {
  readonly key: string;
  readonly displayName: string;
  readonly apiBaseUrl: string;
  readonly auth: CredentialAuth;
  /** Headers every call gets (API versions the provider requires). */
  readonly extraHeaders?: Readonly<Record<string, string>>;
  readonly oauth?: OAuthEndpoints;
  /** Whether `provision` can create a connector with a platform key from server configuration. */
  readonly platformKeys: boolean;
  /**
   * `fixed`: the API is at `apiBaseUrl`; `required`: the user gives `base_api_url`;
   * `required_https`: required, HTTPS only and immutable (managed key-value database REST URL).
   */
  readonly baseUrl: "fixed" | "optional" | "required" | "required_https";
  /** `sprites_admin`: the credential is a ums token and the API is this server's. */
  readonly internal?: boolean;
}
