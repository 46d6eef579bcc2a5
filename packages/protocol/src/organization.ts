import { type Static, Type } from "@sinclair/typebox";

/** Spec 2.5, wrapped in `{organization: ...}`. */
export const OrganizationInfo = Type.Object(
  {
    organization: Type.Object({
      slug: Type.String(),
      sprites_enabled: Type.Boolean(),
      active_sprites: Type.Array(Type.String(), { description: "Names of running units" }),
      max_sprites: Type.Integer(),
      active_sprite_limit: Type.Integer(),
    }),
  },
  { title: "OrganizationInfo" },
);
export type OrganizationInfo = Static<typeof OrganizationInfo>;

/** A token's role: `admin` may manage the organization's tokens and pass `private_access: admins`. */
export const TokenRole = Type.Union([Type.Literal("admin"), Type.Literal("member")]);
export type TokenRole = Static<typeof TokenRole>;

/** POST /v1/organizations/{org}/tokens (what the public clients send, plus `role`). */
export const TokenCreateRequest = Type.Object(
  {
    description: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        pattern: "^[^\\x00-\\x1f\\x7f]+$",
        "x-message": "must be 1 to 100 characters, no control characters",
        description: "A name to recognise the token by (default `api`)",
      }),
    ),
    role: Type.Optional(Type.Union([Type.Literal("admin"), Type.Literal("member")], { default: "member" })),
    expires_at: Type.Optional(
      Type.String({
        format: "date-time",
        description: "When the token stops being accepted (RFC 3339, in the future); default: never",
      }),
    ),
    invite_code: Type.Optional(
      Type.String({ maxLength: 256, description: "Sent by the public clients; accepted and not used here" }),
    ),
  },
  { additionalProperties: false, title: "TokenCreateRequest" },
);
export type TokenCreateRequest = Static<typeof TokenCreateRequest>;

/** A token as listed: never its secret. */
export const TokenInfo = Type.Object(
  {
    id: Type.String({ description: "`tok_…`; what DELETE takes" }),
    description: Type.String(),
    role: TokenRole,
    created_at: Type.String({ format: "date-time" }),
    last_used_at: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
    expires_at: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  },
  { title: "TokenInfo" },
);
export type TokenInfo = Static<typeof TokenInfo>;

/** The answer to a create: the secret, this once only. */
export const TokenCreated = Type.Object(
  {
    token: Type.String({ description: "The bearer token; shown only in this answer" }),
    id: Type.String(),
    description: Type.String(),
    role: TokenRole,
    created_at: Type.String({ format: "date-time" }),
    expires_at: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  },
  { title: "TokenCreated" },
);
export type TokenCreated = Static<typeof TokenCreated>;

export const TokenList = Type.Object({ tokens: Type.Array(TokenInfo) }, { title: "TokenList" });
export type TokenList = Static<typeof TokenList>;

/** Issue #20: one state-changing call of the organization, as its audit log keeps it. */
export const AuditEventInfo = Type.Object(
  {
    id: Type.String({ description: "`aud_…`, time-ordered; pass the last one of a page as `before`" }),
    at: Type.String({ format: "date-time" }),
    token_id: Type.Union([Type.String(), Type.Null()], { description: "The token that made the call" }),
    method: Type.String(),
    route: Type.String({ description: "The route's pattern, e.g. `/v1/units/:name/exec`; never a query" }),
    unit: Type.Union([Type.String(), Type.Null()]),
    status: Type.Integer({ description: "The answer's HTTP status (101: a websocket opened)" }),
    code: Type.Union([Type.String(), Type.Null()], { description: "The error code of a refused call" }),
    ms: Type.Integer(),
  },
  { title: "AuditEvent" },
);
export type AuditEventInfo = Static<typeof AuditEventInfo>;

export const AuditQuery = Type.Object(
  {
    since: Type.Optional(Type.String({ format: "date-time", description: "Events at or after this time" })),
    before: Type.Optional(Type.String({ maxLength: 64, description: "Events older than this id (paging)" })),
    unit: Type.Optional(Type.String({ maxLength: 256 })),
    token: Type.Optional(Type.String({ maxLength: 64, description: "A token id (`tok_…`)" })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
  },
  { additionalProperties: false },
);
export type AuditQuery = Static<typeof AuditQuery>;

export const AuditList = Type.Object(
  {
    events: Type.Array(AuditEventInfo),
    next_before: Type.Union([Type.String(), Type.Null()], { description: "Pass as `before` for the next page" }),
  },
  { title: "AuditList" },
);
export type AuditList = Static<typeof AuditList>;
