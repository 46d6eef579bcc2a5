import type {} from "@fastify/websocket";
import { Type } from "@sinclair/typebox";
import { ErrorBody, ErrorCode, ExecSession } from "@ums/protocol";
import type WebSocket from "ws";
import { type Lifecycle, RunningLimitError } from "../../lifecycle/lifecycle.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound, UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";
import { agentEndpoint } from "./agent-endpoint.js";
import { agentRequest } from "./agent-http.js";
import { connectAgent } from "./agent-ws.js";
import { pipeHttpExec } from "./http-exec.js";
import { agentExecQuery, ExecQuery, type ExecQueryValue } from "./query.js";
import { holdAgentSocket, joinWebsockets } from "./ws-proxy.js";

export interface ExecDeps {
  readonly units: UnitService;
  readonly lifecycle: Lifecycle;
  readonly runtime: UnitRuntime;
}

const SessionParams = Type.Object({
  name: Type.String({ maxLength: 256 }),
  id: Type.String({ pattern: "^\\d{1,9}$" }),
});

/** The unit could not be reached (502) or its agent did not answer in time (504, UMS_AGENT_TIMEOUT). */
const agentErrors = { 502: ErrorBody, 504: ErrorBody } as const;

declare module "fastify" {
  interface FastifyRequest {
    /** The agent websocket opened before a client websocket is accepted. */
    agentSocket?: WebSocket;
    releaseUnit?: () => void;
  }
}

/** Wakes the unit for a request; lifecycle failures become API errors. */
export async function acquire(lifecycle: Lifecycle, org: OrgRecord, unit: UnitRecord): Promise<() => void> {
  try {
    return await lifecycle.acquire(org, unit);
  } catch (err) {
    if (err instanceof RunningLimitError) throw new ApiError(409, ErrorCode.RunningLimit, err.message);
    if (err instanceof ApiError) throw err;
    throw new ApiError(
      502,
      ErrorCode.UnitUnavailable,
      `unit '${unit.name}' could not be started: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

function agentFailure(err: unknown): ApiError {
  if (err instanceof ApiError) return err; // e.g. the 504 of a missed deadline (agent-endpoint.ts)
  const e = err as { status?: number; body?: string; message?: string };
  if (e.status && e.status < 500 && e.body) {
    try {
      const parsed = JSON.parse(e.body) as { error?: string; errors?: string[]; code?: string };
      const code = (parsed.code as ErrorCode | undefined) ?? ErrorCode.Validation;
      return new ApiError(e.status, code, parsed.error ?? parsed.errors?.join("; ") ?? "rejected", parsed.errors);
    } catch {}
  }
  return new ApiError(502, ErrorCode.UnitUnavailable, `the unit's agent is not reachable: ${e.message ?? String(err)}`);
}

/** Spec 4.3: exec over HTTP and websockets, sessions, kill. */
export function execRoutes(app: ApiInstance, { units, lifecycle, runtime }: ExecDeps): void {
  const tags = ["exec"];
  // HTTP exec bodies are raw stdin bytes of any type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_req, _payload, done) => done(null));

  /** Wakes the unit and opens the agent websocket; errors become HTTP errors before any upgrade. */
  async function openSession(
    req: import("fastify").FastifyRequest,
    path: string,
  ): Promise<{ agent: WebSocket; release: () => void }> {
    const { name } = req.params as { name: string };
    const unit = await units.require(req.auth.org, name);
    // A unit that died since it was last seen alive fails the first connect: check it (booting it
    // again if need be) and try once more.
    for (let attempt = 1; ; attempt++) {
      const release = await acquire(lifecycle, req.auth.org, unit);
      try {
        return { agent: await connectAgent(agentEndpoint(runtime, lifecycle, unit), path), release };
      } catch (err) {
        release();
        const refused = /ECONNREFUSED|ENOENT/.test(String((err as { code?: string }).code ?? err));
        if (attempt > 1 || !refused) throw agentFailure(err);
        lifecycle.suspect(unit.id);
      }
    }
  }

  app.post(
    "/v1/units/:name/exec",
    {
      schema: {
        tags,
        summary: "Run a command (non-TTY); the response streams stream-id-prefixed frames and ends with [3, exit code]",
        params: UnitParams,
        querystring: ExecQuery,
        response: { ...commonErrors, ...notFound, ...agentErrors },
      },
    },
    async (req, reply) => {
      const q = req.query as ExecQueryValue;
      // Port notifications travel only on websockets: the agent need not watch ports for this one.
      const { agent, release } = await openSession(
        req,
        `/exec?${agentExecQuery({ ...q, tty: false }, { ports: "false" })}`,
      );
      pipeHttpExec(req, reply, agent, q.stdin ?? false, release);
    },
  );

  app.route({
    method: "GET",
    url: "/v1/units/:name/exec",
    schema: {
      tags,
      summary: "List exec sessions (plain GET) or start one (websocket upgrade, DESIGN.md section 8)",
      params: UnitParams,
      querystring: Type.Partial(ExecQuery),
      response: { 200: Type.Array(ExecSession), ...commonErrors, ...notFound, ...agentErrors },
    },
    preHandler: async (req) => {
      if (!req.ws) return;
      const q = req.query as Partial<ExecQueryValue>;
      if (!q.cmd || q.cmd.length === 0) throw ApiError.validation(["cmd: is required"]);
      const { agent, release } = await openSession(req, `/exec?${agentExecQuery(q as ExecQueryValue)}`);
      holdAgentSocket(req, agent, release);
    },
    handler: async (req) => {
      const unit = await units.require(req.auth.org, req.params.name);
      if (lifecycle.statusOf(unit.id) === "cold") return [];
      const release = await acquire(lifecycle, req.auth.org, unit);
      try {
        const res = await agentRequest(agentEndpoint(runtime, lifecycle, unit), "GET", "/exec");
        if (res.status !== 200) throw agentFailure({ status: res.status, body: res.body });
        return JSON.parse(res.body);
      } catch (err) {
        throw agentFailure(err);
      } finally {
        release();
      }
    },
    wsHandler: (socket, req) => joinWebsockets(socket, req.agentSocket as WebSocket, req.releaseUnit ?? (() => {})),
  });

  app.route({
    method: "GET",
    url: "/v1/units/:name/exec/:id",
    schema: {
      tags,
      summary: "Attach to a live exec session (websocket)",
      params: SessionParams,
      response: { ...notFound, ...agentErrors },
    },
    preHandler: async (req) => {
      if (!req.ws)
        throw new ApiError(400, ErrorCode.Validation, "attach with a websocket upgrade (Connection: Upgrade)");
      const { id } = req.params as { id: string };
      const { agent, release } = await openSession(req, `/exec/${id}`);
      holdAgentSocket(req, agent, release);
    },
    handler: async () => {
      throw new ApiError(400, ErrorCode.Validation, "attach with a websocket upgrade (Connection: Upgrade)");
    },
    wsHandler: (socket, req) => joinWebsockets(socket, req.agentSocket as WebSocket, req.releaseUnit ?? (() => {})),
  });

  app.post(
    "/v1/units/:name/exec/:id/kill",
    {
      schema: {
        tags,
        summary: "Signal a session's process group and wait for it (NDJSON, spec 6.3)",
        params: SessionParams,
        querystring: Type.Object(
          {
            signal: Type.Optional(Type.String({ maxLength: 16, default: "SIGTERM" })),
            timeout: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600, default: 10 })),
          },
          { additionalProperties: false },
        ),
        response: { ...commonErrors, 404: ErrorBody, ...agentErrors },
      },
    },
    async (req, reply) => {
      const unit = await units.require(req.auth.org, req.params.name);
      if (lifecycle.statusOf(unit.id) === "cold") {
        throw new ApiError(404, ErrorCode.SessionNotFound, `no exec session ${req.params.id} in unit '${unit.name}'`);
      }
      const release = await acquire(lifecycle, req.auth.org, unit);
      const q = new URLSearchParams({
        signal: req.query.signal ?? "SIGTERM",
        timeout: String(req.query.timeout ?? 10),
      });
      let res: Awaited<ReturnType<typeof agentRequest>>;
      try {
        res = await agentRequest(agentEndpoint(runtime, lifecycle, unit), "POST", `/exec/${req.params.id}/kill?${q}`, {
          stream: true,
        });
      } catch (err) {
        release();
        throw agentFailure(err);
      }
      if (res.status !== 200) {
        release();
        throw agentFailure({ status: res.status, body: res.body });
      }
      reply.hijack();
      reply.raw.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
      const stream = res.stream;
      let ended = false;
      const end = (last?: string) => {
        if (ended) return;
        ended = true;
        if (!reply.raw.writableEnded) reply.raw.end(last);
        stream?.destroy();
        release();
      };
      stream?.on("data", (chunk: Buffer) => {
        // A write after the end is an 'error' event on the response, which nothing here listens to.
        if (!reply.raw.writableEnded) reply.raw.write(chunk);
      });
      stream?.on("end", () => end());
      stream?.on("error", (err) =>
        end(`${JSON.stringify({ type: "error", message: `lost the unit's agent: ${err.message}` })}\n`),
      );
      // The client left: the kill goes on in the unit, but nothing here waits for it any more.
      reply.raw.once("close", () => end());
    },
  );
}
