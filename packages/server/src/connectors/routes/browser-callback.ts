import { Type } from "@sinclair/typebox";
import { ErrorCode } from "@ums/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import { consoleCookie, sessionHash } from "../../api/console/session.js";
import type { ApiInstance } from "../../api/instance.js";
import { ApiError } from "../../errors/api-error.js";
import { toApiError } from "../../errors/respond.js";
import type { Store } from "../../store/store.js";
import type { OAuthFlow } from "../oauth/flow.js";

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);

function page(reply: FastifyReply, status: number, title: string, text: string, back?: string) {
  return reply
    .code(status)
    .type("text/html; charset=utf-8")
    .header("cache-control", "no-store")
    .header("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'")
    .header("referrer-policy", "no-referrer")
    .send(
      `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
        `<style>body{font:16px system-ui;margin:4em auto;max-width:36em}</style></head>` +
        `<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p>` +
        (back ? `<p><a href="${escapeHtml(back)}">Back to the console</a></p>` : "") +
        "</body></html>\n",
    );
}

/**
 * Issue #14: the provider's redirect is a cross-site navigation, on which the browser withholds the
 * SameSite=Strict console cookie. This same-origin page asks again at once (a meta refresh, no
 * script: the console's CSP allows none inline), now with the cookie; `relay=1` marks the second
 * request, so a browser with no session gets an answer, not a loop.
 */
function relayPage(reply: FastifyReply, again: string) {
  const href = escapeHtml(again);
  return reply
    .code(200)
    .type("text/html; charset=utf-8")
    .header("cache-control", "no-store")
    .header("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'")
    .header("referrer-policy", "no-referrer")
    .send(
      `<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${href}">` +
        `<title>Finishing sign-in</title><style>body{font:16px system-ui;margin:4em auto;max-width:36em}</style></head>` +
        `<body><h1>Finishing the connection…</h1><p><a href="${href}">Continue</a></p></body></html>\n`,
    );
}

/** Which console session the request's cookie is, if a valid one. */
async function cookieSession(req: FastifyRequest, store: Store): Promise<string | undefined> {
  const cookie = consoleCookie(req);
  if (cookie === undefined || !/^[A-Za-z0-9_-]{43}$/.test(cookie)) return undefined;
  const found = await store.consoleSessions.authenticate(sessionHash(cookie), new Date().toISOString());
  return found?.session.idHash;
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
          // Issue #14: set by the relay page (the request that carries the console cookie).
          relay: Type.Optional(Type.Literal("1")),
        }),
      },
    },
    async (req, reply) => {
      const { provider } = req.params;
      const { code, state, error, relay } = req.query;
      if (error !== undefined) {
        return page(reply, 400, "Connector not created", `The provider answered: ${error.slice(0, 100)}.`);
      }
      try {
        if (!code || !state) throw ApiError.validation(["code and state are required"]);
        // Issue #14: a flow the console started is completed only by the browser of that session.
        const bound = await oauth.boundSession(state);
        if (bound !== undefined) {
          const session = await cookieSession(req, store);
          if (session === undefined && relay === undefined && consoleCookie(req) === undefined) {
            const again = new URLSearchParams({ code, state, relay: "1" });
            return relayPage(reply, `/v1/oauth/${encodeURIComponent(provider)}/callback?${again}`);
          }
          if (session !== bound) {
            return page(
              reply,
              403,
              "Connector not created",
              "This authorization was started in another ums console session: finish it in the browser " +
                "signed in to that session (or start it again from here).",
              "/console/",
            );
          }
        }
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
          bound !== undefined ? "/console/" : undefined,
        );
      } catch (err) {
        const api = toApiError(err);
        if (!api) throw err;
        return page(reply, api.status, "Connector not created", api.errors?.join("; ") ?? api.message);
      }
    },
  );
}
