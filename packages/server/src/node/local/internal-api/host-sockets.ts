import { chmod, lchown, mkdir, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { dirname, join } from "node:path";
import { ErrorCode } from "@ums/protocol";
import type { Logger } from "pino";
import { ApiError } from "../../../errors/api-error.js";
import { writeError } from "../../../errors/respond.js";
import type { Lifecycle } from "../../../lifecycle/lifecycle.js";
import { checkpointInfo } from "../../../present/checkpoint.js";
import type { UnitRuntime } from "../../../runtime/runtime.js";
import type { CheckpointRecord, UnitRecord } from "../../../store/records.js";
import type { Store } from "../../../store/store.js";
import { readLimited, TooLargeError } from "../../../util/read-limited.js";
import type { HttpTargets } from "../http-targets.js";
import { KeepAwakeTasks } from "./tasks.js";

interface Deps {
  readonly store: Store;
  readonly runtime: UnitRuntime;
  readonly lifecycle: Lifecycle;
  readonly log: Logger;
  /** Forgotten when the unit's services change from inside it, and whenever the unit stops. */
  readonly httpTargets?: HttpTargets;
  /** Issue #15: an object store holds copies: a stored checkpoint not on the node is restorable. */
  readonly replicas?: boolean;
}

/**
 * ums's side of each running unit's internal API (spec 4.7: checkpoints, keep-awake tasks (tasks.ts),
 * and the agent's note that the unit's services changed): one Unix socket per
 * unit, in a host-owned directory that only that unit sees, read-only, at /.unit/run (its agent
 * forwards /.unit/api.sock to it). The socket names the unit; requests carry no token.
 * The directory is not writable from the unit (docs/SECURITY.md, "The boundary rule"), so the
 * path below is ours alone: removing, binding and chowning it cannot be redirected by the unit.
 */
export class HostSockets {
  private readonly servers = new Map<string, Server>();
  private readonly tasks: KeepAwakeTasks;

  constructor(private readonly deps: Deps) {
    // In the unit's host-side run directory: <run>/exposed/host.sock → <run>/tasks.json.
    this.tasks = new KeepAwakeTasks(deps.lifecycle.activity, {
      path: (id) => join(dirname(dirname(deps.runtime.hostSocket(id).path)), "tasks.json"),
    });
  }

  async open(unitId: string): Promise<void> {
    this.deps.httpTargets?.forget(unitId);
    if (this.servers.has(unitId)) return;
    this.tasks.reload(unitId);
    const { path, uid } = this.deps.runtime.hostSocket(unitId);
    const server = createServer((req, res) => {
      this.handle(unitId, req, res).catch((err) => {
        // The same answers as the API's (errors/respond.ts): a typed error is the unit's to read.
        if (writeError(res, err).internal) this.deps.log.error({ err, unitId }, "internal API request failed");
      });
    });
    this.servers.set(unitId, server);
    await mkdir(dirname(path), { recursive: true, mode: 0o755 });
    await rm(path, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => {
        server.off("error", reject);
        resolve();
      });
    });
    // A failed accept (e.g. out of descriptors) later is logged; with no listener it would end ums serve.
    server.on("error", (err) => this.deps.log.error({ err, unitId }, "internal API socket error"));
    // Only the unit's root (its agent) may connect.
    await lchown(path, uid, uid);
    await chmod(path, 0o600);
  }

  /** The unit stopped: its socket and its tasks go. */
  async close(unitId: string): Promise<void> {
    this.tasks.clear(unitId);
    await this.closeSocket(unitId);
  }

  /** The server stops; running units keep their tasks for the next server (reload in open()). */
  async closeAll(): Promise<void> {
    for (const id of this.servers.keys()) this.tasks.forget(id);
    await Promise.all([...this.servers.keys()].map((id) => this.closeSocket(id)));
  }

  private async closeSocket(unitId: string): Promise<void> {
    this.deps.httpTargets?.forget(unitId);
    const server = this.servers.get(unitId);
    if (!server) return;
    this.servers.delete(unitId);
    // close() alone waits for every connection to end; an agent may hold an idle keep-alive one.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  private async handle(unitId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const unit = await this.deps.store.units.getById(unitId);
    if (!unit) throw new ApiError(404, ErrorCode.UnitNotFound, "this unit no longer exists");
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const one = /^\/v1\/checkpoints\/(v\d{1,9})(\/restore)?$/.exec(path);
    if (req.method === "GET" && path === "/v1/checkpoints") {
      const list = await this.deps.store.checkpoints.list(unit.id);
      return reply(
        res,
        200,
        list.map((cp) => this.info(unit, cp)),
      );
    }
    if (req.method === "POST" && path === "/v1/checkpoint") return this.checkpoint(unit, req, res);
    if (req.method === "POST" && path === "/v1/services/changed") {
      this.deps.httpTargets?.forget(unit.id);
      res.writeHead(204).end();
      return;
    }
    if (path === "/v1/tasks" || path.startsWith("/v1/tasks/")) return this.task(unit.id, req, res, path);
    if (one) {
      const cp = await this.deps.store.checkpoints.get(unit.id, one[1] ?? "");
      if (!cp) throw new ApiError(404, ErrorCode.CheckpointNotFound, `this unit has no checkpoint '${one[1]}'`);
      if (req.method === "GET" && !one[2]) return reply(res, 200, this.info(unit, cp));
      if (req.method === "POST" && one[2]) {
        // Spec 4.7: 202 at once; the restore stops this unit, this connection with it.
        reply(res, 202, { status: "accepted", checkpoint: cp.id });
        setTimeout(() => void this.restore(unit, cp.id), 50);
        return;
      }
      if (req.method === "DELETE" && !one[2]) {
        // The active checkpoint is refused by the lifecycle (409, ActiveCheckpointError).
        await this.deps.lifecycle.checkpoints.delete(unit, cp);
        res.writeHead(204).end();
        return;
      }
    }
    throw new ApiError(404, ErrorCode.RouteNotFound, `no internal route ${req.method} ${path}`);
  }

  private info(unit: UnitRecord, cp: CheckpointRecord) {
    const stored = this.deps.replicas === true && cp.replica?.state === "replicated";
    return checkpointInfo(unit, cp, stored || this.deps.runtime.hasCheckpoint(unit.id, cp.id));
  }

  private async task(unitId: string, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const name = path === "/v1/tasks" ? null : decodeURIComponent(path.slice("/v1/tasks/".length));
    const json = async (): Promise<Record<string, unknown> | null> => {
      try {
        const v = JSON.parse(await readBody(req));
        return typeof v === "object" && v !== null && !Array.isArray(v) ? v : null;
      } catch {
        return null;
      }
    };
    const badBody = ApiError.validation(['body: must be JSON like {"name": "build", "expire": "10m"}']);
    let out: { status: number; body?: unknown } | undefined;
    if (name === null && req.method === "GET") out = { status: 200, body: this.tasks.list(unitId) };
    else if (name === null && req.method === "POST") {
      const b = await json();
      if (!b) throw badBody;
      out = this.tasks.set(unitId, b.name, b.expire);
    } else if (name !== null && req.method === "GET") out = this.tasks.get(unitId, name);
    else if (name !== null && req.method === "PUT") {
      const b = await json();
      if (!b) throw badBody;
      out = this.tasks.set(unitId, name, b.expire);
    } else if (name !== null && req.method === "DELETE") out = this.tasks.delete(unitId, name);
    if (!out) throw new ApiError(405, ErrorCode.MethodNotAllowed, `no internal route ${req.method} ${path}`);
    if (out.body === undefined) return void res.writeHead(out.status).end();
    reply(res, out.status, out.body);
  }

  /** Spec 6.2: NDJSON `status` starting → progress (percent) → complete (id). */
  private async checkpoint(unit: UnitRecord, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let comment = "";
    try {
      const body = await readBody(req);
      if (body.trim()) comment = String((JSON.parse(body) as { comment?: unknown }).comment ?? "");
    } catch {
      throw ApiError.validation(['body: must be JSON like {"comment": "..."}']);
    }
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const send = (o: object) => res.write(`${JSON.stringify(o)}\n`);
    send({ status: "starting", message: `checkpointing unit '${unit.name}'` });
    try {
      const { checkpoint } = await this.deps.lifecycle.checkpoints.checkpoint(unit, comment, () =>
        send({ status: "progress", percent: 50 }),
      );
      send({ status: "progress", percent: 100 });
      send({ status: "complete", id: checkpoint.id });
      this.deps.lifecycle.event({
        orgId: unit.orgId,
        type: "unit.checkpointed",
        unit: unit.name,
        actor: "unit",
        data: { checkpoint: checkpoint.id },
      });
    } catch (err) {
      send({ status: "error", message: err instanceof Error ? err.message : String(err) });
    }
    res.end();
  }

  private async restore(unit: UnitRecord, cpId: string): Promise<void> {
    try {
      const cp = await this.deps.store.checkpoints.get(unit.id, cpId);
      const org = await this.deps.store.orgs.getById(unit.orgId);
      if (cp && org) {
        const backup = await this.deps.lifecycle.checkpoints.restore(org, unit, cp, () => {});
        this.deps.lifecycle.event({
          orgId: unit.orgId,
          type: "unit.restored",
          unit: unit.name,
          actor: "unit",
          data: { checkpoint: cp.id, backup: backup.id },
        });
      }
    } catch (err) {
      this.deps.log.error({ err, unitId: unit.id, checkpoint: cpId }, "restore asked from inside the unit failed");
    }
  }
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** A request body of the unit's (JSON, small); a larger one is a bad request. */
async function readBody(req: IncomingMessage, limit = 64 * 1024): Promise<string> {
  try {
    return await readLimited(req, limit);
  } catch (err) {
    if (err instanceof TooLargeError) throw ApiError.validation([`body: must be at most ${limit} bytes`]);
    throw err;
  }
}
