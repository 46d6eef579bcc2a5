import { type Static, Type } from "@sinclair/typebox";

/** Spec 2.11: a gateway path rule, an exact provider path or a prefix ending in `*`. */
export const ENDPOINT_PATTERN = "^/[^*?#\\s]{0,511}\\*?$";
/** A unit label (spec 2.1 `labels`; assigned through the units API). */
export const LABEL_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,62}$";
export const LABEL_RULES = "1-63 letters, digits and . _ : / -, starting with a letter or digit";
export const MAX_LABELS = 32;

export const Label = Type.String({ pattern: LABEL_PATTERN, "x-message": `must be ${LABEL_RULES}` });
export const Labels = Type.Array(Label, { maxItems: MAX_LABELS, uniqueItems: true });

const Endpoint = Type.String({
  pattern: ENDPOINT_PATTERN,
  "x-message": "must be a path starting with '/', optionally ending in '*' (prefix); no '?', '#' or spaces",
});

/** Spec 2.11 AccessPolicy; an empty or missing policy denies unit use. */
export const AccessPolicy = Type.Object(
  {
    allow_all: Type.Optional(Type.Boolean()),
    allowed_endpoints: Type.Optional(Type.Array(Endpoint, { maxItems: 200 })),
    blocked_endpoints: Type.Optional(Type.Array(Endpoint, { maxItems: 200 })),
    name_prefix: Type.Optional(Type.String({ minLength: 1, maxLength: 63 })),
    sprite_labels: Type.Optional(Type.Array(Label, { maxItems: MAX_LABELS })),
  },
  { title: "AccessPolicy", additionalProperties: false },
);
export type AccessPolicy = Static<typeof AccessPolicy>;

export const ConnectionType = Type.Union([
  Type.Literal("oauth"),
  Type.Literal("api_key"),
  Type.Literal("provisioned"),
  Type.Literal("internal"),
]);
export type ConnectionType = Static<typeof ConnectionType>;

/** Spec 2.11 Connection; secrets are never part of it. */
export const Connection = Type.Object(
  {
    id: Type.String({ description: "`conn_<id>`" }),
    provider: Type.String(),
    provider_account_id: Type.String(),
    provider_account_name: Type.Optional(Type.String()),
    connection_type: Type.Optional(ConnectionType),
    access_policy: Type.Optional(AccessPolicy),
    scopes: Type.Optional(Type.String({ description: "Comma-separated granted OAuth scopes" })),
    provider_info: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    token_expires_at: Type.Optional(Type.String({ format: "date-time" })),
    inserted_at: Type.Optional(Type.String({ format: "date-time" })),
    updated_at: Type.Optional(Type.String({ format: "date-time" })),
    usage_snippet: Type.Optional(Type.String()),
    user_id: Type.Optional(Type.String()),
  },
  { title: "Connection" },
);
export type Connection = Static<typeof Connection>;

export const ConnectionEnvelope = Type.Object({ connection: Connection });
export const ConnectionList = Type.Object({ connections: Type.Array(Connection) });

const ProviderKey = Type.String({ minLength: 1, maxLength: 64, pattern: "^[a-z0-9_]+$" });

export const ListConnectionsQuery = Type.Object(
  { provider: Type.Optional(ProviderKey) },
  { additionalProperties: false },
);

/** Spec 4.8 POST /v1/oauth/connections/api_key. */
export const ApiKeyRequest = Type.Object(
  {
    provider: ProviderKey,
    api_key: Type.String({ minLength: 1, maxLength: 8192 }),
    access_policy: Type.Optional(AccessPolicy),
    base_api_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    provider_account_name: Type.Optional(Type.String({ maxLength: 256 })),
  },
  { additionalProperties: false },
);
export type ApiKeyRequest = Static<typeof ApiKeyRequest>;

/** Spec 4.8 POST /v1/oauth/connections/provision. */
export const ProvisionRequest = Type.Object(
  { provider: ProviderKey, access_policy: Type.Optional(AccessPolicy) },
  { additionalProperties: false },
);

/** Spec 4.8 PUT/PATCH /v1/oauth/connections/{id}: replaces the policy. */
export const UpdateConnectionRequest = Type.Object({ access_policy: AccessPolicy }, { additionalProperties: false });

export const ConnectionParams = Type.Object({ id: Type.String({ maxLength: 128 }) });
export const ProviderParams = Type.Object({ provider: Type.String({ maxLength: 64 }) });

/** Spec 4.8 GET /v1/oauth/{provider}/authorize. */
export const AuthorizeQuery = Type.Object(
  {
    scopes: Type.Optional(Type.String({ maxLength: 2048 })),
    add_scopes: Type.Optional(Type.String({ maxLength: 2048 })),
    redirect_uri: Type.Optional(Type.String({ maxLength: 2048 })),
    state: Type.Optional(
      Type.String({
        minLength: 16,
        maxLength: 512,
        // RFC 6749 §A.5 (VSCHAR) without the space; at least 16 characters, so it stays hard to guess.
        pattern: "^[\\x21-\\x7E]+$",
        "x-message": "must be 16 to 512 printable ASCII characters, no spaces",
        description:
          "Put into the authorization URL exactly as given; generated when omitted. It must not be in use by another pending authorization.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type AuthorizeQuery = Static<typeof AuthorizeQuery>;
export const AuthorizeResponse = Type.Object({ authorize_url: Type.String(), state: Type.String() });

/** Spec 4.8 POST /v1/oauth/{provider}/callback. */
export const CallbackRequest = Type.Object(
  {
    code: Type.String({ minLength: 1, maxLength: 4096 }),
    redirect_uri: Type.Optional(Type.String({ maxLength: 2048 })),
    state: Type.String({ minLength: 1, maxLength: 1024 }),
    access_policy: Type.Optional(AccessPolicy),
  },
  { additionalProperties: false },
);
export type CallbackRequest = Static<typeof CallbackRequest>;

/** GET /v1/oauth/providers (ours): the registry without secrets. */
export const ProviderInfo = Type.Object({
  key: Type.String(),
  display_name: Type.String(),
  api_base_url: Type.String(),
  auth: Type.String({ description: "How the credential is applied: bearer, header, basic, sigv4, ums_token" }),
  oauth: Type.Boolean(),
  authorize_url: Type.Optional(Type.String()),
  token_url: Type.Optional(Type.String()),
  default_scopes: Type.Array(Type.String()),
  platform_keys: Type.Boolean({ description: "Whether provision can create a platform-managed connector" }),
  base_api_url_required: Type.Boolean(),
});
export const ProviderList = Type.Object({ providers: Type.Array(ProviderInfo) });
