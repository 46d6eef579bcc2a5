import { Type } from "@sinclair/typebox";
import {
  ApiKeyRequest,
  AuthorizeQuery,
  AuthorizeResponse,
  CallbackRequest,
  ConnectionEnvelope,
  ConnectionList,
  ConnectionParams,
  ErrorBody,
  ListConnectionsQuery,
  ProviderList,
  ProviderParams,
  ProvisionRequest,
  UpdateConnectionRequest,
} from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import type { ApiInstance } from "../../api/instance.js";
import { commonErrors, notFound } from "../../api/schemas.js";
import type { OAuthFlow } from "../oauth/flow.js";
import type { ConnectorService } from "../service/service.js";

/** The service's own callback for a provider (spec 4.8 `redirect_uri` default), as the client reached us. */
export function defaultRedirect(req: FastifyRequest, provider: string): string {
  return `${req.protocol}://${req.host}/v1/oauth/${encodeURIComponent(provider)}/callback`;
}

/** Spec 4.8: connectors and OAuth (bearer-authenticated routes). */
export function connectorRoutes(app: ApiInstance, connectors: ConnectorService, oauth: OAuthFlow): void {
  const tags = ["connectors"];
  const one = { 200: ConnectionEnvelope, ...commonErrors, ...notFound };

  app.get(
    "/v1/oauth/providers",
    { schema: { tags, summary: "The provider registry", response: { 200: ProviderList, ...commonErrors } } },
    async () => ({
      providers: connectors.deps.registry.list().map((p) => ({
        key: p.key,
        display_name: p.displayName,
        api_base_url: p.apiBaseUrl,
        auth: p.internal ? "ums_token" : p.auth.kind,
        oauth: p.oauth !== undefined,
        ...(p.oauth && { authorize_url: p.oauth.authorizeUrl, token_url: p.oauth.tokenUrl }),
        default_scopes: [...(p.oauth?.defaultScopes ?? [])],
        platform_keys: p.platformKeys,
        base_api_url_required: p.baseUrl === "required" || p.baseUrl === "required_https",
      })),
    }),
  );

  app.get(
    "/v1/oauth/connections",
    {
      schema: {
        tags,
        summary: "List connectors",
        querystring: ListConnectionsQuery,
        response: { 200: ConnectionList, ...commonErrors },
      },
    },
    async (req) => ({
      connections: (await connectors.deps.store.connectors.list(req.auth.org.id, req.query.provider)).map((c) =>
        connectors.present(c),
      ),
    }),
  );

  app.post(
    "/v1/oauth/connections/api_key",
    {
      schema: {
        tags,
        summary: "Create a connector from an API key (stored encrypted, never returned)",
        body: ApiKeyRequest,
        response: { 201: ConnectionEnvelope, ...commonErrors },
      },
    },
    async (req, reply) =>
      reply.code(201).send({ connection: connectors.present(await connectors.createApiKey(req.auth, req.body)) }),
  );

  app.post(
    "/v1/oauth/connections/provision",
    {
      schema: {
        tags,
        summary: "Create a connector with a platform-managed key",
        body: ProvisionRequest,
        response: { 201: ConnectionEnvelope, ...commonErrors },
      },
    },
    async (req, reply) => {
      const c = await connectors.provision(req.auth, req.body.provider, req.body.access_policy);
      return reply.code(201).send({ connection: connectors.present(c) });
    },
  );

  app.get(
    "/v1/oauth/connections/:id",
    { schema: { tags, summary: "Get a connector", params: ConnectionParams, response: one } },
    async (req) => ({ connection: connectors.present(await connectors.require(req.auth.org, req.params.id)) }),
  );

  for (const method of ["PUT", "PATCH"] as const) {
    app.route({
      method,
      url: "/v1/oauth/connections/:id",
      schema: {
        tags,
        summary: "Replace a connector's access policy",
        params: ConnectionParams,
        body: UpdateConnectionRequest,
        response: one,
      },
      handler: async (req) => ({
        connection: connectors.present(await connectors.setPolicy(req.auth.org, req.params.id, req.body.access_policy)),
      }),
    });
  }

  app.delete(
    "/v1/oauth/connections/:id",
    {
      schema: {
        tags,
        summary: "Delete a connector and its encrypted credentials",
        params: ConnectionParams,
        response: { 204: Type.Null(), ...commonErrors, ...notFound },
      },
    },
    async (req, reply) => {
      await connectors.delete(req.auth.org, req.params.id);
      return reply.code(204).send(null);
    },
  );

  app.get(
    "/v1/oauth/:provider/authorize",
    {
      schema: {
        tags,
        summary: "An authorization URL with the caller's state (or a new one), bound to the organization on the server",
        params: ProviderParams,
        querystring: AuthorizeQuery,
        response: { 200: AuthorizeResponse, ...commonErrors, ...notFound },
      },
    },
    async (req) =>
      oauth.authorize(
        req.auth.org,
        req.params.provider,
        req.query,
        defaultRedirect(req, req.params.provider),
        // Issue #14: a flow the console starts is its session's (browser-callback.ts).
        req.auth.session?.idHash,
      ),
  );

  app.post(
    "/v1/oauth/:provider/callback",
    {
      schema: {
        tags,
        summary: "Exchange the authorization code and store the tokens",
        params: ProviderParams,
        body: CallbackRequest,
        response: { 201: ConnectionEnvelope, ...commonErrors, ...notFound, 502: ErrorBody },
      },
    },
    async (req, reply) => {
      const { code, state, redirect_uri, access_policy } = req.body;
      oauth.client(req.params.provider);
      const s = await oauth.claimState(req.params.provider, state, req.auth.org.id, redirect_uri);
      const c = await oauth.callback(req.auth.org, req.params.provider, s, code, access_policy, req.auth.token.id);
      return reply.code(201).send({ connection: connectors.present(c) });
    },
  );
}
