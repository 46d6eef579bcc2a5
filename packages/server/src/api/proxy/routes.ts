import { Type } from "@sinclair/typebox";
import { ErrorBody, ErrorCode } from "@ums/protocol";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";

const METHODS = ["DELETE", "GET", "HEAD", "PATCH", "POST", "PUT", "OPTIONS"] as const;

/**
 * Spec 4.1: any other request under /v1/units/{name}/<path> belongs to the unit's own HTTP
 * target. Forwarding needs running units; until then an existing unit answers 501 so that the
 * path is never mistaken for an unknown route.
 */
export function proxyRoutes(app: ApiInstance, units: UnitService): void {
  // The body belongs to the unit: never parse it here.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_req, _payload, done) => done(null));
  app.route({
    method: [...METHODS],
    url: "/v1/units/:name/*",
    schema: {
      tags: ["proxy"],
      summary: "Forwarded to the unit's HTTP target",
      params: Type.Intersect([UnitParams, Type.Object({ "*": Type.String() })]),
      response: { 404: ErrorBody, 501: ErrorBody },
    },
    handler: async (req) => {
      await units.require(req.auth.org, req.params.name);
      throw new ApiError(
        501,
        ErrorCode.NotImplemented,
        `proxying to unit '${req.params.name}' is not available yet: this server does not run units`,
      );
    },
  });
}
