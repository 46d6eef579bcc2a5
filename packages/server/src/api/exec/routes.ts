import { type Static, Type } from "@sinclair/typebox";
import { ErrorBody, ErrorCode, ExecSession, parseDuration } from "@ums/protocol";
import { readAnswerError } from "../../node/errors.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { OrgRecord } from "../../store/records.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound, UnitParams } from "../schemas.js";
import { firstCall, leaseUnit } from "../unit-access/lease.js";
import { holdUnitWebsocket, joinHeldSocket, leasedHttpExec, leasedWebsocket } from "../unit-access/websockets.js";
import type { UnitService } from "../units/service.js";
import { pipeAgentExecAnswer, pipeHttpExec } from "./http-exec.js";
import { agentExecQuery, ExecQuery, type ExecQueryValue } from "./query.js";

export interface ExecDeps {
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly node: UnitNode;
}

const SessionParams = Type.Object({
  name: Type.String({ maxLength: 256 }),
  id: Type.String({ pattern: "^\\d{1,9}$" }),
});

/** The unit could not be reached (502) or its agent did not answer in time (504, UMS_AGENT_TIMEOUT). */
const agentErrors = { 502: ErrorBody, 504: ErrorBody } as const;

/** Under /v1/sprites the session list is wrapped, `{"sessions": [...]}` (what the Sprites clients read). */
const SpritesSessionList = Type.Object({ sessions: Type.Array(ExecSession) }, { title: "SpritesSessionList" });

/** The Sprites clients also send `cc` (`detachable` is in ExecQuery: a session kept until it exits). */
const SpritesExecQuery = Type.Composite(
  [Type.Partial(ExecQuery), Type.Object({ cc: Type.Optional(Type.Boolean({ description: "Accepted and ignored" })) })],
  { additionalProperties: false },
);

/** The kill wait: integer seconds or a `10s`-style duration (docs/ARCHITECTURE.md section 10), at most an hour. */
function killTimeoutSeconds(value: string | undefined): number {
  if (value === undefined) return 10;
  const ms = parseDuration(value);
  if (ms === null || ms > 3_600_000) {
    throw ApiError.validation([`timeout: '${value}' is not a duration of at most 1h (seconds, or e.g. 10s, 500ms)`]);
  }
  return Math.ceil(ms / 1000);
}

/** Spec 4.3: exec over HTTP and websockets, sessions, kill. */
export function execRoutes(app: ApiInstance, { units, node, dialect }: ExecDeps): void {
  const tags = ["exec"];
  // HTTP exec bodies are raw stdin bytes of any type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_req, _payload, done) => done(null));

  async function listSessions(org: OrgRecord, name: string): Promise<ExecSession[]> {
    const unit = await units.require(org, name);
    if ((await node.status(unit.id)) === "cold") return [];
    const lease = await node.wake(org, unit);
    try {
      return await lease.agent.json<ExecSession[]>("GET", "/exec");
    } finally {
      lease.release();
    }
  }

  app.post(
    "/:name/exec",
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
      const path = `/exec?${agentExecQuery({ ...q, tty: false }, { ports: "false" })}`;
      const lease = await leaseUnit(req, units, node);
      // One plain HTTP request to the agent (the body goes on to it as stdin when asked); for an
      // agent from before that, the session's websocket.
      req.raw.on("error", () => {});
      const answer = await leasedHttpExec(lease, path, q.stdin ? req.raw : undefined);
      if (answer) {
        if (!q.stdin) req.raw.resume(); // a body without stdin=true is read and dropped
        return pipeAgentExecAnswer(reply, answer, () => lease.release());
      }
      const agent = await leasedWebsocket(lease, path);
      pipeHttpExec(req, reply, agent, q.stdin ?? false, () => lease.release());
    },
  );

  app.route({
    method: "GET",
    url: "/:name/exec",
    schema: {
      tags,
      summary:
        dialect === "sprites"
          ? "List exec sessions as {sessions: [...]} under /v1/sprites (plain GET) or start one (websocket upgrade; with `id`: attach to that session). A TTY or `detachable` session outlives its websocket until it exits unless `max_run_after_disconnect` says otherwise"
          : "List exec sessions (plain GET) or start one (websocket upgrade, spec 4.3; with `id`: attach to that session). A TTY session outlives its websocket until it exits unless `max_run_after_disconnect` says otherwise",
      params: UnitParams,
      querystring: dialect === "sprites" ? SpritesExecQuery : Type.Partial(ExecQuery),
      // One type for both (the handler answers by dialect); each dialect documents its own.
      response: {
        200: (dialect === "sprites" ? SpritesSessionList : Type.Array(ExecSession)) as typeof SpritesSessionList,
        ...commonErrors,
        ...notFound,
        ...agentErrors,
      },
    },
    preHandler: async (req) => {
      if (!req.ws) return;
      const q = req.query as Partial<ExecQueryValue>;
      // `?id=` attaches to that session, whatever else the query says (the Go client's older form).
      if (q.id !== undefined) {
        if (!/^\d{1,9}$/.test(q.id)) throw ApiError.validation(["id: must be a session id (digits)"]);
        return holdUnitWebsocket(req, await leaseUnit(req, units, node), `/exec/${q.id}`);
      }
      if (!q.cmd || q.cmd.length === 0) throw ApiError.validation(["cmd: is required"]);
      const path = `/exec?${agentExecQuery(q as ExecQueryValue)}`;
      await holdUnitWebsocket(req, await leaseUnit(req, units, node), path);
    },
    handler: async (req) => {
      const sessions = await listSessions(req.auth.org, req.params.name);
      return (dialect === "sprites" ? { sessions } : sessions) as Static<typeof SpritesSessionList>;
    },
    wsHandler: joinHeldSocket,
  });

  app.route({
    method: "GET",
    url: "/:name/exec/:id",
    schema: {
      tags,
      summary:
        "Attach to an exec session (websocket): its recent output is replayed, then it streams live; the query (e.g. a client's `cmd`) is ignored",
      params: SessionParams,
      response: { ...notFound, ...agentErrors },
    },
    preHandler: async (req) => {
      if (!req.ws)
        throw new ApiError(400, ErrorCode.Validation, "attach with a websocket upgrade (Connection: Upgrade)");
      const { id } = req.params as { id: string };
      await holdUnitWebsocket(req, await leaseUnit(req, units, node), `/exec/${id}`);
    },
    handler: async () => {
      throw new ApiError(400, ErrorCode.Validation, "attach with a websocket upgrade (Connection: Upgrade)");
    },
    wsHandler: joinHeldSocket,
  });

  app.post(
    "/:name/exec/:id/kill",
    {
      schema: {
        tags,
        summary: "Signal a session's process group and wait for it (NDJSON, spec 6.3)",
        params: SessionParams,
        querystring: Type.Object(
          {
            signal: Type.Optional(Type.String({ maxLength: 16, default: "SIGTERM" })),
            timeout: Type.Optional(
              Type.String({
                maxLength: 16,
                description: "Wait for the exit: seconds (default 10) or e.g. 10s, at most 1h",
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { ...commonErrors, 404: ErrorBody, ...agentErrors },
      },
    },
    async (req, reply) => {
      const timeout = killTimeoutSeconds(req.query.timeout);
      const unit = await units.require(req.auth.org, req.params.name);
      if ((await node.status(unit.id)) === "cold") {
        throw new ApiError(404, ErrorCode.SessionNotFound, `no exec session ${req.params.id} in unit '${unit.name}'`);
      }
      const lease = await node.wake(req.auth.org, unit);
      const q = new URLSearchParams({
        signal: req.query.signal ?? "SIGTERM",
        timeout: String(timeout),
      });
      const stream = await firstCall(lease, async () => {
        const res = await lease.agent.request("POST", `/exec/${req.params.id}/kill?${q}`);
        if (res.statusCode !== 200) throw await readAnswerError(res);
        return res;
      });
      reply.hijack();
      reply.raw.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
      let ended = false;
      const end = (last?: string) => {
        if (ended) return;
        ended = true;
        if (!reply.raw.writableEnded) reply.raw.end(last);
        stream.destroy();
        lease.release();
      };
      stream.on("data", (chunk: Buffer) => {
        // A write after the end is an 'error' event on the response, which nothing here listens to.
        if (!reply.raw.writableEnded) reply.raw.write(chunk);
      });
      stream.on("end", () => end());
      stream.on("error", (err) =>
        end(`${JSON.stringify({ type: "error", message: `lost the unit's agent: ${err.message}` })}\n`),
      );
      // The client left: the kill goes on in the unit, but nothing here waits for it any more.
      reply.raw.once("close", () => end());
    },
  );
}
