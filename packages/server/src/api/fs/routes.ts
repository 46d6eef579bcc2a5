import { IncomingMessage } from "node:http";
import type {} from "@fastify/websocket";
import { type TSchema, Type } from "@sinclair/typebox";
import {
  ErrorBody,
  ErrorCode,
  FsChmodBody,
  FsChmodResponse,
  FsChownBody,
  FsChownResponse,
  FsCopyBody,
  FsCopyResponse,
  FsDeleteBody,
  FsDeleteResponse,
  FsErrorBody,
  FsListQuery,
  FsListResponse,
  FsReadQuery,
  FsRenameBody,
  FsRenameResponse,
  FsWriteQuery,
  FsWriteResponse,
} from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import type WebSocket from "ws";
import type { Lifecycle } from "../../lifecycle/lifecycle.js";
import type { AgentEndpoint } from "../../runtime/agent-client.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import { ApiError, sendError } from "../errors.js";
import { agentEndpoint } from "../exec/agent-endpoint.js";
import { connectAgent } from "../exec/agent-ws.js";
import { acquire } from "../exec/routes.js";
import { holdAgentSocket, joinWebsockets } from "../exec/ws-proxy.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";
import { formatValidationErrors, validatorCompiler } from "../validation.js";
import { agentFailure, agentFs, agentJson, agentRead, FsHttpError, type RawRead } from "./agent.js";

// Spec 4.4 and DESIGN.md section 8: the filesystem API. The server validates, resolves `workingDir`,
// wakes the unit and hands each operation to the unit's agent, which runs it inside the unit with the
// identity asked for (the unit user, or root with `asRoot`; see packages/agent/src/fs/worker.ts).
// File bodies stream through in both directions. Error bodies: see packages/protocol/src/fs.ts.

export interface FsDeps {
  readonly units: UnitService;
  readonly lifecycle: Lifecycle;
  readonly runtime: UnitRuntime;
}

const ReadQuery = Type.Object(
  { ...FsReadQuery.properties, asRoot: Type.Optional(Type.Boolean({ default: false })) },
  { additionalProperties: false },
);
const ListQuery = Type.Object(
  { ...FsListQuery.properties, asRoot: Type.Optional(Type.Boolean({ default: false })) },
  { additionalProperties: false },
);

const fsErrors = {
  400: Type.Union([FsErrorBody, Type.Object({ errors: Type.Array(Type.String()), code: Type.String() })]),
  401: ErrorBody,
  403: FsErrorBody,
  404: Type.Union([FsErrorBody, ErrorBody]),
  500: FsErrorBody,
  502: ErrorBody,
} as const;

/** `path` resolved against `workingDir` (posix rules; the unit's kernel resolves symlinks). */
export function resolveIn(workingDir: string, path: string, field = "path"): string {
  if (path.includes("\0") || workingDir.includes("\0")) throw ApiError.validation([`${field}: must not contain NUL`]);
  if (!workingDir.startsWith("/")) throw ApiError.validation(["workingDir: must be an absolute path"]);
  const parts: string[] = [];
  for (const seg of (path.startsWith("/") ? path : `${workingDir}/${path}`).split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") parts.pop();
    else parts.push(seg);
  }
  return `/${parts.join("/")}`;
}

function check<T>(schema: TSchema, value: unknown, part: "body" | "querystring"): T {
  const validate = validatorCompiler({ schema, httpPart: part, method: "DELETE", url: "" }) as ((
    v: unknown,
  ) => boolean) & {
    errors?: unknown[] | null;
  };
  if (!validate(value)) throw ApiError.validation(formatValidationErrors(validate.errors ?? [], part));
  return value as T;
}

export function fsRoutes(app: ApiInstance, { units, lifecycle, runtime }: FsDeps): void {
  const tags = ["filesystem"];
  app.setErrorHandler((err, req, reply) => {
    if (err instanceof FsHttpError) {
      return reply.code(err.status).type("application/json; charset=utf-8").serializer(JSON.stringify).send(err.body());
    }
    return sendError(err, req, reply);
  });

  /** Wakes the unit; returns its agent and the release of the unit. */
  async function open(req: FastifyRequest): Promise<{ socket: AgentEndpoint; release: () => void }> {
    const { name } = req.params as { name: string };
    const unit = await units.require(req.auth.org, name);
    const release = await acquire(lifecycle, req.auth.org, unit);
    return { socket: agentEndpoint(runtime, lifecycle, unit), release };
  }

  /**
   * A failure to reach the agent, as the client may see it: a system error names only its code (its
   * message names the agent's socket, a host path); ours say what happened.
   */
  const unreachable = (err: unknown) => {
    if (err instanceof ApiError || err instanceof FsHttpError) return err;
    const code = (err as NodeJS.ErrnoException)?.code;
    const why = typeof code === "string" ? code : err instanceof Error ? err.message : String(err);
    return new ApiError(502, ErrorCode.UnitUnavailable, `the unit's agent is not reachable (${why})`);
  };

  /** A JSON operation: POST /fs/{op}?as=… with the resolved body. */
  async function jsonOp(req: FastifyRequest, op: string, asRoot: boolean | undefined, body: object): Promise<unknown> {
    const { socket, release } = await open(req);
    try {
      const res = await agentFs(socket, asRoot ? "root" : "user", "POST", `/fs/${op}`, JSON.stringify(body), {
        "content-type": "application/json",
      });
      return await agentJson(res);
    } catch (err) {
      throw unreachable(err);
    } finally {
      release();
    }
  }

  app.get(
    "/v1/units/:name/fs/list",
    {
      schema: {
        tags,
        summary: "List a directory (a file lists as its one entry)",
        params: UnitParams,
        querystring: ListQuery,
        response: { 200: FsListResponse, ...fsErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const path = resolveIn(q.workingDir, q.path);
      const { socket, release } = await open(req);
      try {
        const p = new URLSearchParams({ path, recursive: String(q.recursive ?? false) });
        if (q.pattern) p.set("pattern", q.pattern);
        const res = await agentFs(socket, q.asRoot ? "root" : "user", "GET", `/fs/list?${p}`);
        return (await agentJson(res)) as FsListResponse;
      } catch (err) {
        throw unreachable(err);
      } finally {
        release();
      }
    },
  );

  app.get(
    "/v1/units/:name/fs/read",
    {
      schema: {
        tags,
        summary: "Read a file: its raw bytes, streamed",
        params: UnitParams,
        querystring: ReadQuery,
        response: {
          200: Type.Unknown({ description: "The file's raw bytes (application/octet-stream)" }),
          ...fsErrors,
        },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const path = resolveIn(q.workingDir, q.path);
      const { socket, release } = await open(req);
      let read: RawRead | IncomingMessage;
      try {
        read = await agentRead(socket, q.asRoot ? "root" : "user", path);
        if (read instanceof IncomingMessage && read.statusCode !== 200) throw await agentFailure(read);
      } catch (err) {
        release();
        throw unreachable(err);
      }
      if (read instanceof IncomingMessage) {
        // An agent from before raw reads (a unit that has run since before this server was updated)
        // answers the upgrade request as an ordinary one: the bytes come in its response.
        reply.raw.once("close", release);
        reply.header("content-type", "application/octet-stream");
        const length = read.headers["content-length"];
        if (length !== undefined) reply.header("content-length", length);
        return reply.send(read);
      }
      // The bytes go from the agent's connection to the client's as they come (relay.ts), so the
      // reply is ours from here; it is logged as the onResponse hook logs the others.
      reply.hijack();
      const start = performance.now();
      reply.raw.writeHead(200, {
        "content-type": "application/octet-stream",
        ...(read.size !== undefined && { "content-length": read.size }),
      });
      const complete = await read.relayTo(reply.raw);
      release();
      req.log.info(
        {
          method: req.method,
          url: req.originalUrl,
          status: 200,
          ms: Math.round((performance.now() - start) * 100) / 100,
          complete,
        },
        "request",
      );
    },
  );

  // Writes take the raw body as a stream: no parser of this scope reads it.
  app.register(async (scope) => {
    const raw = scope as unknown as ApiInstance;
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser("*", (_req, _payload, done) => done(null));
    raw.put(
      "/v1/units/:name/fs/write",
      {
        schema: {
          tags,
          summary: "Write a file from the raw request body (streamed); creates or truncates it",
          params: UnitParams,
          querystring: FsWriteQuery,
          response: { 200: FsWriteResponse, ...fsErrors },
        },
      },
      async (req) => {
        const q = req.query;
        const path = resolveIn(q.workingDir, q.path);
        const p = new URLSearchParams({
          path,
          mkdir: String(q.mkdir === true || q.mkdirParents === true),
        });
        if (q.mode) p.set("mode", q.mode);
        const { socket, release } = await open(req);
        try {
          const headers: Record<string, string> = { "content-type": "application/octet-stream" };
          const length = req.headers["content-length"];
          if (length !== undefined) headers["content-length"] = length;
          const res = await agentFs(socket, q.asRoot ? "root" : "user", "PUT", `/fs/write?${p}`, req.raw, headers);
          return (await agentJson(res)) as FsWriteResponse;
        } catch (err) {
          throw unreachable(err);
        } finally {
          release();
        }
      },
    );
  });

  app.post(
    "/v1/units/:name/fs/chmod",
    {
      schema: {
        tags,
        summary: "Change permissions",
        params: UnitParams,
        body: FsChmodBody,
        response: { 200: FsChmodResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      return (await jsonOp(req, "chmod", b.asRoot, {
        path: resolveIn(b.workingDir, b.path),
        mode: b.mode,
        recursive: b.recursive ?? false,
      })) as FsChmodResponse;
    },
  );

  app.post(
    "/v1/units/:name/fs/chown",
    {
      schema: {
        tags,
        summary: "Change owner and group (ids or names; at least one of uid and gid)",
        params: UnitParams,
        body: FsChownBody,
        response: { 200: FsChownResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      if (b.uid === undefined && b.gid === undefined) throw ApiError.validation(["uid: uid or gid is required"]);
      return (await jsonOp(req, "chown", b.asRoot, {
        path: resolveIn(b.workingDir, b.path),
        ...(b.uid !== undefined && { uid: b.uid }),
        ...(b.gid !== undefined && { gid: b.gid }),
        recursive: b.recursive ?? false,
      })) as FsChownResponse;
    },
  );

  app.post(
    "/v1/units/:name/fs/copy",
    {
      schema: {
        tags,
        summary: "Copy a file, or a directory with recursive (into dest when dest is a directory)",
        params: UnitParams,
        body: FsCopyBody,
        response: { 200: FsCopyResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      return (await jsonOp(req, "copy", b.asRoot, {
        source: resolveIn(b.workingDir, b.source, "source"),
        dest: resolveIn(b.workingDir, b.dest, "dest"),
        recursive: b.recursive ?? false,
        preserveAttrs: b.preserveAttrs ?? false,
      })) as FsCopyResponse;
    },
  );

  app.post(
    "/v1/units/:name/fs/rename",
    {
      schema: {
        tags,
        summary: "Rename (move) a path",
        params: UnitParams,
        body: FsRenameBody,
        response: { 200: FsRenameResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      return (await jsonOp(req, "rename", b.asRoot, {
        source: resolveIn(b.workingDir, b.source, "source"),
        dest: resolveIn(b.workingDir, b.dest, "dest"),
      })) as FsRenameResponse;
    },
  );

  // DESIGN.md section 8: a JSON body, or the same fields as query parameters.
  app.delete(
    "/v1/units/:name/fs/delete",
    {
      schema: {
        tags,
        summary: "Delete a path (JSON body, or the same fields as query parameters)",
        params: UnitParams,
        response: { 200: FsDeleteResponse, ...fsErrors },
      },
    },
    async (req) => {
      const hasBody = req.body !== undefined && req.body !== null;
      const b = hasBody
        ? check<FsDeleteBody>(FsDeleteBody, req.body, "body")
        : check<FsDeleteBody>(FsDeleteBody, { ...(req.query as object) }, "querystring");
      return (await jsonOp(req, "delete", b.asRoot, {
        path: resolveIn(b.workingDir, b.path),
        recursive: b.recursive ?? false,
      })) as FsDeleteResponse;
    },
  );

  app.route({
    method: "GET",
    url: "/v1/units/:name/fs/watch",
    schema: {
      tags,
      summary:
        'File watch (websocket): send {"type":"subscribe","path","recursive"}; receive {"type":"event","event","path"}',
      params: UnitParams,
      response: { 404: ErrorBody },
    },
    preHandler: async (req) => {
      if (!req.ws) {
        // A unit that is not the caller's answers 404 whatever the request (security/cross-org.test.ts).
        await units.require(req.auth.org, (req.params as { name: string }).name);
        throw ApiError.validation(["watch with a websocket upgrade (Connection: Upgrade)"]);
      }
      const { socket, release } = await open(req);
      try {
        holdAgentSocket(req, await connectAgent(socket, "/fs/watch"), release);
      } catch (err) {
        release();
        throw unreachable(err);
      }
    },
    handler: async () => {
      throw ApiError.validation(["watch with a websocket upgrade (Connection: Upgrade)"]);
    },
    wsHandler: (socket, req) => joinWebsockets(socket, req.agentSocket as WebSocket, req.releaseUnit ?? (() => {})),
  });
}
