import { ErrorBody, ErrorCode, ValidationErrorBody } from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import type WebSocket from "ws";
import { hashToken, parseBearer } from "../../auth/tokens.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { Store } from "../../store/store.js";
import { assertNotExpired } from "../auth.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import type { TunnelCount } from "../tunnels/count.js";
import { wakeFor } from "../unit-access/lease.js";
import type { UnitService } from "../units/service.js";
import { execOp } from "./exec-op.js";
import { fsOps } from "./fs-ops.js";
import type { OpDeps } from "./op-deps.js";
import { proxyOp } from "./proxy-op.js";
import { ControlSession, type OpStarter } from "./session.js";
import { websocketTransport } from "./transport.js";

// GET /v1/sprites/{name}/control (and /v1/units/{name}/control): the multiplexed control websocket the
// public Sprites clients pool per unit (the protocol: CONTROL_PROTOCOL below, shown in docs/API.md). The Go client offers
// itself control when this upgrade succeeds (and falls back to its other routes on a refusal), so the
// route refuses what it can before the upgrade: another organization's unit or a missing one is 404,
// as everywhere. The connection holds no unit awake: each op leases the unit for its own length,
// after checking the token again (a token revoked while a pooled connection stays open stops there).

export interface ControlDeps {
  /** Which of the API's two dialects this route answers in (api/dialect.ts); the shapes are the same. */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly node: UnitNode;
  readonly store: Store;
  /** Open tunnels per unit, shared with `/proxy` (a `proxy` op is one). */
  readonly tunnels: TunnelCount;
}

const UPGRADE = "control with a websocket upgrade (Connection: Upgrade)";

/** The protocol, as docs/API.md shows it under this route. */
const CONTROL_PROTOCOL = [
  "The websocket the public Sprites clients pool per unit (the Go client uses it when this upgrade succeeds).",
  "One op runs at a time. Envelopes are text frames: `control:` followed by JSON, or bare JSON (the Go client's",
  "filesystem ops); answers come in the framing of the op.start they answer.",
  "Client: `op.start` `{type, op, args}` (args an object of strings and lists of strings, or a URL-encoded",
  'string), `release` (stops a running op; nothing more of it is sent). Server: `op.complete` (`{"exitCode"}` for',
  "exec), `op.error` `{error, code, status, path?, errors?}`; an unknown op is UMS_CONTROL_UNKNOWN_OP, a broken",
  "envelope or an op.start while one runs UMS_CONTROL_PROTOCOL. Websocket pings keep it alive.",
  "`exec` (args: the /exec query; `id` attaches): the /exec websocket's frames out; in: a pipe's stdin as raw",
  "binary frames, EOF as the one byte 4, TTY bytes raw, `resize`/`signal` JSON as text or binary frames.",
  "`fs.read`, `fs.write`, `fs.list`, `fs.delete`, `fs.chmod`, `fs.chown`, `fs.copy`, `fs.rename` (args: the",
  "/fs/* fields as text; workingDir defaults to /home/unit, a write's mkdirParents to true; a read takes",
  "`start`/`end` byte offsets): one text frame with the route's JSON answer (or its `{error, code, path}`), for",
  "fs.read then one binary frame of the bytes (at most 16 MiB; fs.write sends the file as one binary frame",
  "after op.start), then op.complete or op.error.",
  '`proxy` (args `host` (default localhost), `port`; also as the Go client\'s `{"type":"start","operation":"proxy",',
  '"params":{…}}`): the /proxy tunnel, counted with it: one bare JSON text frame answers `{"status":"connected","target"}`',
  'or `{"status":"error",…,"code"}` (which ends the op; no op.error follows), then binary frames both ways (an empty one',
  "ends the client's side) until `release`; when the target ends, op.complete (prefixed framing) or, in the plain",
  "framing, the websocket closes 1000 (1011 if the connection to the target broke).",
  "The connection holds no unit awake (an op holds it for its length); each op checks the token again.",
].join(" ");

export function controlRoutes(app: ApiInstance, deps: ControlDeps): void {
  app.route({
    method: "GET",
    url: "/:name/control",
    schema: {
      tags: ["control"],
      summary:
        "Control websocket: one op at a time (exec, proxy, fs.read, fs.write, fs.list, fs.delete, fs.chmod, fs.chown, fs.copy, fs.rename) in control:{…} envelopes",
      description: CONTROL_PROTOCOL,
      params: UnitParams,
      response: { 400: ValidationErrorBody, 401: ErrorBody, 404: ErrorBody },
    },
    preHandler: async (req) => {
      await deps.units.require(req.auth.org, (req.params as { name: string }).name);
      if (!req.ws) throw ApiError.validation([UPGRADE]);
    },
    handler: async () => {
      throw ApiError.validation([UPGRADE]);
    },
    wsHandler: (socket, req) => openControl(socket, req, deps),
  });
}

function openControl(socket: WebSocket, req: FastifyRequest, deps: ControlDeps): void {
  const org = req.auth.org;
  const name = (req.params as { name: string }).name;
  const tokenHash = hashToken(parseBearer(req.headers.authorization) ?? "");
  const opDeps: OpDeps = {
    async leaseUnit() {
      const found = await deps.store.tokens.authenticate(tokenHash);
      if (!found || found.org.id !== org.id) {
        throw new ApiError(401, ErrorCode.Unauthorized, "token is not valid (unknown or revoked)");
      }
      assertNotExpired(found.token);
      const unit = await deps.units.require(found.org, name);
      return wakeFor(req, deps.node, found.org, unit);
    },
    logFault: (err) => req.log.error({ err, unit: name }, "control op failed"),
  };
  const ops = new Map<string, OpStarter>([
    ["exec", execOp(opDeps)],
    ["proxy", proxyOp(opDeps, deps.tunnels)],
    ...fsOps(opDeps),
  ]);
  const session = new ControlSession(websocketTransport(socket), ops, opDeps.logFault);
  socket.on("error", () => socket.terminate());
  const opened = Date.now();
  socket.on("close", (code) => {
    session.close();
    // The request log has no line for a websocket (its reply is taken over): one when it ends.
    req.log.info(
      { url: req.originalUrl.split("?")[0], status: 101, code, ops: session.started, ms: Date.now() - opened },
      "control connection closed",
    );
  });
  socket.on("message", (data, isBinary) => {
    const buf = Buffer.isBuffer(data)
      ? data
      : Array.isArray(data)
        ? Buffer.concat(data)
        : Buffer.from(data as ArrayBuffer);
    if (isBinary) session.binary(buf);
    else session.text(buf.toString("utf8"));
  });
}
