import { Type } from "@sinclair/typebox";
import { ErrorBody, SERVICE_NAME_PATTERN, ServiceRequest, ServiceResponse, ServiceSignalRequest } from "@ums/protocol";
import { parseDuration } from "@ums/protocol/duration";
import type { FastifyReply, FastifyRequest } from "fastify";
import { readAnswerError, readJson } from "../../node/errors.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound } from "../schemas.js";
import { firstCall, leaseUnit } from "../unit-access/lease.js";
import type { UnitService } from "../units/service.js";

/**
 * The longest a service's stop waits before SIGKILL (packages/agent/src/services/service.ts
 * STOP_GRACE_MS), plus a margin: a DELETE or PUT answers only once the old process is gone.
 */
const STOP_GRACE_MS = 10_000 + 4000;

// Spec 4.6, 3.2 and 6.4: a unit's services. ums validates, wakes the unit and hands each call to the
// unit's agent, whose supervisor owns the services (packages/agent/src/services/); NDJSON streams
// (start, stop, restart, logs, and a PUT that asks for one) flow through as the agent writes them.
// A PUT answers the spec's ServiceResponse (spec 4.6) under /v1/units, and streams its start as NDJSON
// for `duration` when the client asks (`Accept: application/x-ndjson`) or under /v1/sprites, whose
// clients read every PUT, start and stop answer as an NDJSON stream. Under /v1/sprites a signal
// answers 204 and a ServiceRequest may spell `http_port` as `httpPort` (the JS client's field).

export interface ServiceDeps {
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly node: UnitNode;
}

const ServiceName = Type.String({
  pattern: SERVICE_NAME_PATTERN,
  "x-message": "must be 1-63 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
});
const Params = Type.Object({ name: Type.String({ maxLength: 256 }), service: ServiceName });
const Duration = Type.String({
  pattern: "^(\\d{1,9}(\\.\\d+)?|(\\d{1,9}(\\.\\d+)?(ms|s|m|h))+)$",
  maxLength: 32,
  "x-message": "must be seconds (e.g. 5) or a duration such as 10s or 500ms",
});
const DurationQuery = Type.Object({ duration: Type.Optional(Duration) }, { additionalProperties: false });
const StopQuery = Type.Object(
  {
    duration: Type.Optional(Duration),
    timeout: Type.Optional({
      ...Duration,
      description: "How long the process has after SIGTERM before SIGKILL (default 10 s, at most 60 s)",
    }),
  },
  { additionalProperties: false },
);
const LogsQuery = Type.Object(
  { duration: Type.Optional(Duration), lines: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })) },
  { additionalProperties: false },
);
const errors = { ...commonErrors, ...notFound, 409: ErrorBody, 502: ErrorBody, 504: ErrorBody };
const ndjsonResponse = { 200: Type.Any({ description: "NDJSON stream of spec 6.4 events" }) };

type Req = FastifyRequest<{ Params: { name: string; service?: string }; Querystring: Record<string, unknown> }>;

/** The longest stop grace a client may ask for (`timeout` of a stop); the agent caps it the same. */
const MAX_STOP_TIMEOUT_MS = 60_000;

/** Whether a PUT streams its start as NDJSON (true) or answers the ServiceResponse as JSON. */
export function putStreams(dialect: Dialect, accept: string | undefined): boolean {
  const types = (accept ?? "").split(",").map((t) => t.split(";")[0]?.trim().toLowerCase());
  if (types.includes("application/x-ndjson")) return true;
  if (dialect === "units") return false;
  // The public clients send no Accept (or */*); only a client that asks for JSON alone gets JSON.
  return !(types.length > 0 && types.every((t) => t === "application/json"));
}

export function serviceRoutes(app: ApiInstance, deps: ServiceDeps): void {
  const tags = ["services"];

  /**
   * Sends one call to the unit's agent and answers with its JSON or streams its NDJSON. `overrides`
   * replace query parameters; with `noContent` a 200 is answered as 204, its body dropped.
   */
  async function call(
    req: Req,
    reply: FastifyReply,
    method: string,
    path: string,
    body?: unknown,
    { overrides = {}, noContent = false }: { overrides?: Record<string, string>; noContent?: boolean } = {},
  ): Promise<void> {
    const lease = await leaseUnit(req, deps.units, deps.node);
    const release = () => lease.release();
    const params = new URLSearchParams(
      Object.entries(req.query ?? {}).map(([k, v]) => [k, String(v)] as [string, string]),
    );
    for (const [k, v] of Object.entries(overrides)) params.set(k, v);
    const query = params.toString();
    const res = await firstCall(lease, () =>
      lease.agent.request(method, `/services${path}${query ? `?${query}` : ""}`, {
        ...(body !== undefined && { body: JSON.stringify(body) }),
        // A DELETE or PUT answers once the old process is gone: it may wait a stop's grace.
        extraMs: method === "DELETE" || method === "PUT" ? STOP_GRACE_MS : 0,
      }),
    );
    const status = res.statusCode ?? 502;
    if (method === "PUT" || method === "DELETE") lease.servicesChanged();
    if (status === 204 || (status === 200 && noContent)) {
      res.resume();
      release();
      reply.code(204).send(null);
      return;
    }
    if (status !== 200) {
      release();
      throw await readAnswerError(res);
    }
    if (!String(res.headers["content-type"]).startsWith("application/x-ndjson")) {
      try {
        reply.send(await readJson(res));
      } finally {
        release();
      }
      return;
    }
    reply.hijack();
    reply.raw.writeHead(200, {
      "content-type": "application/x-ndjson",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    });
    res.pipe(reply.raw);
    const end = () => {
      release();
      res.destroy();
    };
    res.once("end", end);
    res.once("error", () => {
      reply.raw.destroy();
      end();
    });
    reply.raw.once("close", end);
  }

  app.get(
    "/:name/services",
    {
      schema: {
        tags,
        summary: "The unit's services with their state",
        params: Type.Object({ name: Type.String({ maxLength: 256 }) }),
        response: { 200: Type.Array(ServiceResponse), ...errors },
      },
    },
    (req, reply) => call(req as Req, reply, "GET", ""),
  );

  app.get(
    "/:name/services/:service",
    { schema: { tags, summary: "One service", params: Params, response: { 200: ServiceResponse, ...errors } } },
    (req, reply) => call(req as Req, reply, "GET", `/${req.params.service}`),
  );

  app.put(
    "/:name/services/:service",
    {
      schema: {
        tags,
        summary:
          deps.dialect === "units"
            ? "Create or update a service and start it; answers the ServiceResponse (spec 4.6). With `Accept: application/x-ndjson` the start's events stream as NDJSON for `duration` (default 5 s; 0: the ServiceResponse)"
            : "Create or update a service and start it; the start's events stream as NDJSON for `duration` (default 5 s) unless the client accepts only application/json (the Sprites clients read a stream; `httpPort` is taken for `http_port`)",
        params: Params,
        querystring: DurationQuery,
        body: ServiceRequest,
        response: { 200: Type.Any({ description: "ServiceResponse, or an NDJSON stream (spec 6.4)" }), ...errors },
      },
      // The JS client sends its ServiceRequest as written in its types, with `httpPort`.
      preValidation: async (req) => {
        const body = req.body as Record<string, unknown> | null;
        if (deps.dialect !== "sprites" || !body || typeof body !== "object" || Array.isArray(body)) return;
        if ("httpPort" in body && !("http_port" in body)) {
          const { httpPort, ...rest } = body;
          req.body = { ...rest, http_port: httpPort } as typeof req.body;
        }
      },
    },
    (req, reply) =>
      call(req as Req, reply, "PUT", `/${req.params.service}`, req.body, {
        overrides: putStreams(deps.dialect, req.headers.accept) ? {} : { duration: "0" },
      }),
  );

  app.delete(
    "/:name/services/:service",
    {
      schema: { tags, summary: "Stop and delete a service", params: Params, response: { 204: Type.Null(), ...errors } },
    },
    (req, reply) => call(req as Req, reply, "DELETE", `/${req.params.service}`),
  );

  for (const action of ["start", "stop", "restart"] as const) {
    const querystring = action === "stop" ? StopQuery : DurationQuery;
    app.post(
      `/:name/services/:service/${action}`,
      {
        schema: {
          tags,
          summary: {
            start: "Start a service (and the services it needs); NDJSON for `duration`",
            stop: "Stop a service (SIGTERM, SIGKILL after `timeout`); it stays stopped, across boots too, until started again (NDJSON)",
            restart: "Stop the service if it runs, then start it (NDJSON stop and start progress, spec 6.4)",
          }[action],
          params: Params,
          querystring,
          response: { ...ndjsonResponse, ...errors },
        },
      },
      (req, reply) => {
        const timeout = (req.query as { timeout?: string }).timeout;
        if (timeout !== undefined && (parseDuration(timeout) ?? Number.POSITIVE_INFINITY) > MAX_STOP_TIMEOUT_MS)
          throw ApiError.validation(["timeout: must be at most 60s"]);
        return call(req as Req, reply, "POST", `/${req.params.service}/${action}`);
      },
    );
  }

  app.get(
    "/:name/services/:service/logs",
    {
      schema: {
        tags,
        summary: "The service's log (`lines` last lines, default all), then new lines for `duration` (default 0)",
        params: Params,
        querystring: LogsQuery,
        response: { ...ndjsonResponse, ...errors },
      },
    },
    (req, reply) => call(req as Req, reply, "GET", `/${req.params.service}/logs`),
  );

  app.post(
    "/:name/services/signal",
    {
      schema: {
        tags,
        summary:
          deps.dialect === "units"
            ? "Send a signal to a service's process group"
            : "Send a signal to a service's process group; answers 204 (the Sprites clients' shape)",
        params: Type.Object({ name: Type.String({ maxLength: 256 }) }),
        body: ServiceSignalRequest,
        response:
          deps.dialect === "units"
            ? { 200: Type.Object({ name: Type.String(), signal: Type.String(), pid: Type.Integer() }), ...errors }
            : { 204: Type.Null(), ...errors },
      },
    },
    // The Sprites clients read a signal's answer as 204.
    (req, reply) => call(req as Req, reply, "POST", "/signal", req.body, { noContent: deps.dialect === "sprites" }),
  );
}
