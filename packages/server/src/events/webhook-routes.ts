import { Type } from "@sinclair/typebox";
import { ErrorBody, ErrorCode, WebhookCreated, WebhookCreateRequest, WebhookInfo, WebhookList } from "@ums/protocol";
import type { AuthContext } from "../api/auth.js";
import { ApiError } from "../api/errors.js";
import type { ApiInstance } from "../api/instance.js";
import { commonErrors, notFound } from "../api/schemas.js";
import type { Webhooks } from "./webhooks.js";

function requireAdmin(auth: AuthContext): void {
  if (auth.token.role !== "admin") {
    throw new ApiError(403, ErrorCode.AdminRequired, "only an admin token of the organization manages its webhooks");
  }
}

const Params = Type.Object({ id: Type.String({ maxLength: 64 }) });

/** Issue #17: the organization's webhooks, for its admin tokens. */
export function webhookRoutes(app: ApiInstance, hooks: Webhooks): void {
  const tags = ["events"];
  app.post(
    "/v1/webhooks",
    {
      schema: {
        tags,
        summary: "Register a webhook (admin tokens); the answer holds its signing secret, shown this once",
        body: WebhookCreateRequest,
        response: { 201: WebhookCreated, ...commonErrors, 403: ErrorBody },
      },
    },
    async (req, reply) => {
      requireAdmin(req.auth);
      const created = await hooks.create(req.auth.org, req.body.url, req.body.events ?? []);
      reply.header("cache-control", "no-store");
      return reply.code(201).send(created);
    },
  );
  app.get(
    "/v1/webhooks",
    {
      schema: {
        tags,
        summary: "The organization's webhooks with their last delivery's outcome (admin tokens; never a secret)",
        response: { 200: WebhookList, ...commonErrors, 403: ErrorBody },
      },
    },
    async (req) => {
      requireAdmin(req.auth);
      return { webhooks: await hooks.list(req.auth.org) };
    },
  );
  app.get(
    "/v1/webhooks/:id",
    {
      schema: {
        tags,
        summary: "One webhook (admin tokens; never its secret)",
        params: Params,
        response: { 200: WebhookInfo, ...commonErrors, 403: ErrorBody, ...notFound },
      },
    },
    async (req) => {
      requireAdmin(req.auth);
      return hooks.get(req.auth.org, req.params.id);
    },
  );
  app.delete(
    "/v1/webhooks/:id",
    {
      schema: {
        tags,
        summary: "Delete a webhook; deliveries waiting for it are dropped (admin tokens)",
        params: Params,
        response: { 204: Type.Null(), ...commonErrors, 403: ErrorBody, ...notFound },
      },
    },
    async (req, reply) => {
      requireAdmin(req.auth);
      await hooks.delete(req.auth.org, req.params.id);
      return reply.code(204).send(null);
    },
  );
}
