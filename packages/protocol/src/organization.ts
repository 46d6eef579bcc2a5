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
  },
  { title: "TokenCreated" },
);
export type TokenCreated = Static<typeof TokenCreated>;

export const TokenList = Type.Object({ tokens: Type.Array(TokenInfo) }, { title: "TokenList" });
export type TokenList = Static<typeof TokenList>;
