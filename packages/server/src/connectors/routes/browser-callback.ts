import { Type } from "@sinclair/typebox";
import { ErrorCode } from "@ums/protocol";
import type { FastifyReply } from "fastify";
import type { ApiInstance } from "../../api/instance.js";
import { ApiError } from "../../errors/api-error.js";
import { toApiError } from "../../errors/respond.js";
import type { Store } from "../../store/store.js";
import type { OAuthFlow } from "../oauth/flow.js";

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);

function page(reply: FastifyReply, status: number, title: string, text: string) {
  return reply
    .code(status)
    .type("text/html; charset=utf-8")
    .header("cache-control", "no-store")
    .header("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'")
    .header("referrer-policy", "no-referrer")
    .send(
      `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
        `<style>body{font:16px system-ui;margin:4em auto;max-width:36em}</style></head>` +
        `<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>\n`,
    );
}

/**
 * Spec 4.8 callback, as the provider's browser redirect reaches it (RFC 6749 §4.1.2): no bearer
 * token; the organization is the one the state was issued to (oauth/state.ts). Answers a small page, never the tokens.
 */
export function browserCallbackRoutes(app: ApiInstance, oauth: OAuthFlow, store: Store): void {
  app.get(
    "/v1/oauth/:provider/callback",
    {
      schema: {
        hide: true,
        params: Type.Object({ provider: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object({
          code: Type.Optional(Type.String({ maxLength: 4096 })),
          state: Type.Optional(Type.String({ maxLength: 1024 })),
          error: Type.Optional(Type.String({ maxLength: 256 })),
        }),
      },
    },
    async (req, reply) => {
      const { provider } = req.params;
      const { code, state, error } = req.query;
      if (error !== undefined) {
        return page(reply, 400, "Connector not created", `The provider answered: ${error.slice(0, 100)}.`);
      }
      try {
        if (!code || !state) throw ApiError.validation(["code and state are required"]);
        const s = await oauth.claimState(provider, state, undefined);
        const org = await store.orgs.getById(s.orgId);
        if (!org) throw new ApiError(400, ErrorCode.Validation, "the organization is gone");
        const c = await oauth.callback(org, provider, s, code, undefined, undefined);
        return page(
          reply,
          200,
          "Connector ready",
          `Your ${oauth.client(provider).p.displayName} connector ${c.id} is ready. ` +
            "Give it an access policy so units can use it; you can close this window.",
        );
      } catch (err) {
        const api = toApiError(err);
        if (!api) throw err;
        return page(reply, api.status, "Connector not created", api.errors?.join("; ") ?? api.message);
      }
    },
  );
}
