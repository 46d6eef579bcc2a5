import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import type { AuditEvent } from "../../store/records.js";
import type { Store } from "../../store/store.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The error code the request was answered with (set by sendError), for the audit log. */
    errorCode?: string;
  }
}

/** How long audit events are kept (docs/SECURITY.md "Audit log"). */
export const AUDIT_RETENTION_DAYS = 90;
const PRUNE_EVERY_MS = 60 * 60 * 1000;
const READS = new Set(["GET", "HEAD", "OPTIONS"]);

/** The unit a call is about: its path's, or for a create the name in the body (a name, never more of it). */
function unitOf(req: FastifyRequest): string | null {
  if (req.routeOptions.url?.startsWith("/v1/templates")) return null; // its `name` is a template's
  const fromPath = (req.params as { name?: unknown } | undefined)?.name;
  if (typeof fromPath === "string") return fromPath.slice(0, 256);
  const body = req.body as { name?: unknown } | undefined;
  if (
    req.method === "POST" &&
    /\/(units|sprites)$/.test(req.routeOptions.url ?? "") &&
    typeof body?.name === "string"
  ) {
    return body.name.slice(0, 256);
  }
  return null;
}

let seq = 0;
/** `aud_` + the time in ms (base 36, fixed width) + a counter + random: ids sort as events happened. */
export function auditId(now = Date.now()): string {
  seq = (seq + 1) % 36 ** 3;
  return `aud_${now.toString(36).padStart(9, "0")}${seq.toString(36).padStart(3, "0")}${randomBytes(4).toString("hex")}`;
}

/**
 * Issue #20 part 6: every state-changing call (POST, PUT, PATCH, DELETE, and a websocket opened
 * for an exec session, a control connection or a tunnel) is written to the audit log: who (the
 * token, the organization), what (the method, the route's pattern, the unit), when and the outcome
 * (the status, the error code). Never a body, a query or a header: no secret can reach it. A failed
 * write is logged and the request is not affected.
 */
export class AuditRecorder {
  private lastPrune = 0;

  constructor(private readonly store: Store) {}

  /** The onResponse hook: HTTP answers of state-changing calls (refused websocket upgrades too). */
  readonly onResponse = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!req.auth || (READS.has(req.method) && !req.ws)) return;
    await this.record(req, reply.statusCode, Math.round(reply.elapsedTime));
  };

  /**
   * The onRoute hook: a websocket upgrade that passed its route's preHandlers (the unit found,
   * leased, its agent's socket open) is opened next: recorded as 101 by a last preHandler. A refused
   * upgrade is an HTTP answer, recorded by onResponse. Watches (reads) are not recorded.
   */
  readonly onRoute = (route: RouteOptions): void => {
    if (route.url.endsWith("/watch")) return;
    const own = route.preHandler;
    const list = own === undefined ? [] : Array.isArray(own) ? [...own] : [own];
    const opened = async (req: FastifyRequest): Promise<void> => {
      if (req.ws) await this.record(req, 101, 0);
    };
    route.preHandler = [...list, opened] as RouteOptions["preHandler"];
  };

  private async record(req: FastifyRequest, status: number, ms: number): Promise<void> {
    const now = Date.now();
    const event: AuditEvent = {
      id: auditId(now),
      at: new Date(now).toISOString(),
      orgId: req.auth.org.id,
      tokenId: req.auth.token.id,
      method: req.method,
      route: req.routeOptions.url ?? "(no route)",
      unit: unitOf(req),
      status,
      code: req.errorCode ?? null,
      ms,
    };
    try {
      await this.store.audit.add(event);
      if (now - this.lastPrune > PRUNE_EVERY_MS) {
        this.lastPrune = now;
        await this.store.audit.prune(new Date(now - AUDIT_RETENTION_DAYS * 86_400_000).toISOString());
      }
    } catch (err) {
      req.log.warn({ err, route: event.route }, "audit write failed");
    }
  }
}
