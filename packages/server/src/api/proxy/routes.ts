import type {} from "@fastify/websocket";
import { Type } from "@sinclair/typebox";
import { ErrorBody } from "@ums/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ServerConfig } from "../../config.js";
import { CONSOLE_COOKIE, NO_CONSOLE_COOKIE } from "../console/session.js";
import type { Dialect } from "../dialect.js";
import { UNIT_URL } from "../dialect.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";
import { type ProxyDeps, proxyToUnit } from "./forward.js";
import type { RequestHeaderRules } from "./headers.js";

/** The methods forwarded to a unit (fastify's defaults; WebDAV methods would need `addHttpMethod`). */
export const PROXY_METHODS = ["DELETE", "GET", "HEAD", "PATCH", "POST", "PUT", "OPTIONS"] as const;

/**
 * `/v1/units/{name}/<path>?<query>` (or `/v1/sprites/…`) → `/<path>?<query>`, from the URL as sent
 * (nothing decoded).
 */
export function unitPath(url: string): string {
  const m = UNIT_URL.exec(url);
  return `/${m?.[2] ?? ""}`;
}

/**
 * `/v1/units/{name}/` (the unit's root) would be `GET /v1/units/{name}` under fastify's
 * `ignoreTrailingSlash`: it is routed to the proxy route instead (the unit sees `/`, from the
 * original URL). Other URLs are returned as they are.
 */
export function unitRootUrl(url: string): string {
  const m = /^(\/v1\/(?:units|sprites)\/[^/?#]+\/)(\?.*)?$/s.exec(url);
  return m ? `${m[1]}-${m[2] ?? ""}` : url;
}

/**
 * What a request through `/v1/units/{name}/<path>` carries to the unit (this route and the fast
 * path, api/unit-url/fast-admission.ts): the bearer token authenticated it to ums and is never the
 * unit's business; nor is the console's session (which this route does not take either).
 */
export function apiProxyHeaderRules(host: string, scheme: "http" | "https"): Omit<RequestHeaderRules, "upgrade"> {
  return { dropAuthorization: () => true, dropCookies: [CONSOLE_COOKIE], forwardedHost: host, forwardedProto: scheme };
}

export interface ProxyRouteDeps extends ProxyDeps {
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly config: ServerConfig;
}

/**
 * Spec 4.1: any other request under /v1/units/{name}/<path> goes to the unit's HTTP target.
 * The work is done in `preHandler`, which runs for plain requests and websocket upgrades alike
 * (@fastify/websocket would take over the handler of an upgrade).
 */
export function proxyRoutes(app: ApiInstance, deps: ProxyRouteDeps): void {
  // The body belongs to the unit: never parse it here.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_req, _payload, done) => done(null));
  const forward = async (req: FastifyRequest, reply: FastifyReply) => {
    const { name } = req.params as { name: string };
    const unit = await deps.units.require(req.auth.org, name);
    await proxyToUnit(deps, req, reply, {
      org: req.auth.org,
      unit,
      path: unitPath(req.originalUrl),
      headers: apiProxyHeaderRules(req.headers.host ?? "", deps.config.unitUrlScheme),
    });
  };
  app.route({
    method: [...PROXY_METHODS],
    url: "/:name/*",
    // A unit's pages are never served on the API's origin to a browser holding a console session.
    config: NO_CONSOLE_COOKIE,
    schema: {
      tags: ["proxy"],
      summary: "Forwarded to the unit's HTTP target (port 8080), websockets included",
      params: Type.Intersect([UnitParams, Type.Object({ "*": Type.String() })]),
      response: { 404: ErrorBody, 502: ErrorBody, 504: ErrorBody },
    },
    preHandler: forward,
    // Never reached: `forward` answers or throws.
    handler: async () => {
      throw new Error("proxy handler reached without an answer");
    },
  });
}
