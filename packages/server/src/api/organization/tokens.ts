import { Type } from "@sinclair/typebox";
import { ErrorBody, ErrorCode, TokenCreated, TokenCreateRequest, TokenList } from "@ums/protocol";
import { mintToken } from "../../auth/tokens.js";
import type { TokenRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import type { AuthContext } from "../auth.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors } from "../schemas.js";

const OrgParams = Type.Object({ org: Type.String({ maxLength: 256 }) });
const TokenParams = Type.Object({ org: Type.String({ maxLength: 256 }), id: Type.String({ maxLength: 256 }) });
const refused = { 403: ErrorBody, 404: ErrorBody } as const;
const tags = ["organization"];

/**
 * The organization in the path must be the caller's (404 otherwise, whether or not it exists: one
 * organization learns nothing of another's), and the caller an admin token of it (403).
 */
export function requireAdmin(auth: AuthContext, org: string, what = "manages its tokens"): void {
  if (org !== auth.org.slug) {
    throw new ApiError(404, ErrorCode.OrganizationNotFound, "no such organization for this token");
  }
  if (auth.token.role !== "admin") {
    throw new ApiError(403, ErrorCode.AdminRequired, `only an admin token of the organization ${what}`);
  }
}

const view = (t: TokenRecord) => ({
  id: t.id,
  description: t.name,
  role: t.role,
  created_at: t.createdAt,
  last_used_at: t.lastUsedAt,
  expires_at: t.expiresAt,
});

/**
 * Tokens over the API, for an organization's admin tokens: mint (the secret is answered once and
 * only its SHA-256 is stored), list (never a secret), revoke (at once: every request looks the token
 * up). The organization's last live admin token cannot be revoked here, so the organization always
 * keeps a token that can mint tokens; `ums token revoke` on the host can (docs/SECURITY.md).
 */
export function tokenRoutes(app: ApiInstance, store: Store): void {
  app.post(
    "/v1/organizations/:org/tokens",
    {
      schema: {
        tags,
        summary: "Mint a token of the organization (admin tokens only); its secret is answered once",
        params: OrgParams,
        body: TokenCreateRequest,
        response: { 201: TokenCreated, ...commonErrors, ...refused },
      },
    },
    async (req, reply) => {
      requireAdmin(req.auth, req.params.org);
      const expiresAt = req.body.expires_at === undefined ? null : new Date(req.body.expires_at);
      if (expiresAt && !(expiresAt.getTime() > Date.now())) {
        throw ApiError.validation([`body/expires_at '${req.body.expires_at}' must be a time in the future`]);
      }
      const { secret, record: t } = await mintToken(store.tokens, {
        orgId: req.auth.org.id,
        name: req.body.description ?? "api",
        role: req.body.role ?? "member",
        expiresAt: expiresAt?.toISOString() ?? null,
      });
      req.log.info({ tokenId: t.id, role: t.role, by: req.auth.token.id }, "token created");
      const { last_used_at: _, ...shown } = view(t);
      return reply
        .code(201)
        .header("cache-control", "no-store")
        .send({ token: secret, ...shown });
    },
  );

  app.get(
    "/v1/organizations/:org/tokens",
    {
      schema: {
        tags,
        summary: "The organization's live tokens, never their secrets (admin tokens only)",
        params: OrgParams,
        response: { 200: TokenList, ...commonErrors, ...refused },
      },
    },
    async (req) => {
      requireAdmin(req.auth, req.params.org);
      const live = (await store.tokens.list(req.auth.org.id)).filter((t) => t.revokedAt === null);
      return { tokens: live.map(view) };
    },
  );

  app.delete(
    "/v1/organizations/:org/tokens/:id",
    {
      schema: {
        tags,
        summary: "Revoke a token of the organization at once (admin tokens only; not its last admin token)",
        params: TokenParams,
        response: { 204: Type.Null(), ...commonErrors, ...refused, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      requireAdmin(req.auth, req.params.org);
      const r = await store.tokens.revokeInOrg(req.auth.org.id, req.params.id, new Date().toISOString());
      if (r === "not_found") throw new ApiError(404, ErrorCode.TokenNotFound, `no live token '${req.params.id}'`);
      if (r === "last_admin") {
        throw new ApiError(
          409,
          ErrorCode.LastAdminToken,
          "this is the organization's last admin token: mint another admin token first",
        );
      }
      req.log.info({ tokenId: req.params.id, by: req.auth.token.id }, "token revoked");
      return reply.code(204).send(null);
    },
  );
}
