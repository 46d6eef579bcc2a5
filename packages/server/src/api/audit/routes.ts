import { Type } from "@sinclair/typebox";
import { AuditList, AuditQuery, ErrorBody } from "@ums/protocol";
import type { AuditEvent } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import type { ApiInstance } from "../instance.js";
import { requireAdmin } from "../organization/tokens.js";
import { commonErrors } from "../schemas.js";

const view = (e: AuditEvent) => ({
  id: e.id,
  at: e.at,
  token_id: e.tokenId,
  method: e.method,
  route: e.route,
  unit: e.unit,
  status: e.status,
  code: e.code,
  ms: e.ms,
});

/** Issue #20 part 6: the organization's audit log, newest first, for its admin tokens. */
export function auditRoutes(app: ApiInstance, store: Store): void {
  app.get(
    "/v1/organizations/:org/audit",
    {
      schema: {
        tags: ["organization"],
        summary: "The organization's audit log of state-changing calls, newest first (admin tokens only)",
        params: Type.Object({ org: Type.String({ maxLength: 256 }) }),
        querystring: AuditQuery,
        response: { 200: AuditList, ...commonErrors, 403: ErrorBody, 404: ErrorBody },
      },
    },
    async (req, reply) => {
      requireAdmin(req.auth, req.params.org, "reads its audit log");
      const limit = req.query.limit ?? 100;
      const events = await store.audit.list(req.auth.org.id, {
        since: req.query.since,
        before: req.query.before,
        unit: req.query.unit,
        tokenId: req.query.token,
        limit,
      });
      reply.header("cache-control", "no-store");
      return {
        events: events.map(view),
        next_before: events.length === limit ? (events.at(-1)?.id ?? null) : null,
      };
    },
  );
}
