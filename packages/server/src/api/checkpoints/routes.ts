import { Type } from "@sinclair/typebox";
import { CheckpointInfo, CreateCheckpointRequest, ErrorBody, ErrorCode, ListCheckpointsQuery } from "@ums/protocol";
import { errorAnswer } from "../../errors/respond.js";
import { actorOf } from "../../events/actor.js";
import type { UnitNode } from "../../node/unit-node.js";
import { checkpointInfo } from "../../present/checkpoint.js";
import type { CheckpointRecord, UnitRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound } from "../schemas.js";
import type { UnitService } from "../units/service.js";
import { ndjson } from "./ndjson.js";

export interface CheckpointDeps {
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
  readonly store: Store;
  readonly units: UnitService;
  readonly node: UnitNode;
}

const Params = Type.Object({ name: Type.String({ maxLength: 256 }) });
const CpParams = Type.Object({ name: Type.String({ maxLength: 256 }), id: Type.String({ maxLength: 64 }) });

/** Spec 4.2, 6.1 and 3.3: checkpoints of a unit, taken live, restored with an automatic backup. */
/** A checkpoint and those it descends from (its `source_id` chain), in the list's order. */
function lineage(cps: readonly CheckpointRecord[], id: string): CheckpointRecord[] {
  const byId = new Map(cps.map((c) => [c.id, c]));
  const chain = new Set<string>();
  for (let cp = byId.get(id); cp && !chain.has(cp.id); cp = cp.sourceId ? byId.get(cp.sourceId) : undefined) {
    chain.add(cp.id);
  }
  return cps.filter((c) => chain.has(c.id));
}

export function checkpointRoutes(app: ApiInstance, { store, units, node, dialect }: CheckpointDeps): void {
  const tags = ["checkpoints"];
  /**
   * Spec 2.6 views of the unit's checkpoints, with whether each one can be restored (its files on
   * its node, or in the object store) and, for those with a copy (issue #15), whether its files are
   * on the node itself: a second question to the node (no stored ones counted), only when some are
   * stored; one that is not stored is on the node exactly when it can be restored.
   */
  const infos = async (unit: UnitRecord, cps: readonly CheckpointRecord[]) => {
    const stored = new Set(cps.filter((c) => c.replica?.state === "replicated").map((c) => c.id));
    const [present, local] = await Promise.all([
      node.checkpointsPresent(
        unit.id,
        cps.map((c) => c.id),
        stored,
      ),
      stored.size > 0 ? node.checkpointsPresent(unit.id, [...stored], new Set()) : new Set<string>(),
    ]);
    return cps.map((cp) =>
      checkpointInfo(unit, cp, present.has(cp.id), stored.has(cp.id) ? local.has(cp.id) : present.has(cp.id)),
    );
  };
  const now = () => new Date().toISOString();

  /** Runs `work` behind an NDJSON stream of spec 6.1 events; `complete` also names the checkpoints
   * concerned (`id`, and for a restore `backup_id`), beyond the spec's text, for clients. */
  async function stream(
    reply: import("fastify").FastifyReply,
    work: (info: (msg: string) => void) => Promise<{ data: string; id: string; backup_id?: string }>,
  ) {
    const out = ndjson(reply);
    try {
      const done = await work((data) => out.send({ type: "info", data, time: now() }));
      out.send({ type: "complete", ...done, time: now() });
    } catch (err) {
      // As any answer (errors/respond.ts): a known error's message and code; an internal one's
      // details (host paths, a store's address) only in the log.
      const answer = errorAnswer(err);
      reply.log[answer.internal ? "error" : "info"]({ err }, "checkpoint operation failed");
      out.send({ type: "error", ...answer.body, status: answer.status, time: now() });
    } finally {
      out.end();
    }
  }

  app.post(
    "/:name/checkpoint",
    {
      schema: {
        tags,
        summary: "Save the unit's files and policies as the next checkpoint (NDJSON, spec 6.1)",
        params: Params,
        body: Type.Optional(CreateCheckpointRequest),
        response: { ...commonErrors, ...notFound },
      },
    },
    async (req, reply) => {
      const unit = await units.require(req.auth.org, req.params.name);
      await stream(reply, async (progress) => {
        const { checkpoint, frozenMs } = await node.checkpoint(unit, req.body?.comment ?? "", progress);
        units.emit({
          orgId: unit.orgId,
          type: "unit.checkpointed",
          unit: unit.name,
          actor: actorOf(req),
          data: { checkpoint: checkpoint.id, frozen_ms: frozenMs },
        });
        progress(frozenMs > 0 ? `the unit was frozen for ${frozenMs.toFixed(1)} ms` : "the unit was not running");
        return { data: `checkpoint ${checkpoint.id} created`, id: checkpoint.id };
      });
    },
  );

  // Issue #15 (docs/SCALE-OUT.md): an admin moves a unit to another node (NDJSON progress).
  app.post(
    "/:name/move",
    {
      schema: {
        tags: ["units"],
        summary: "Move the unit to another node, through the object store (admin; NDJSON progress)",
        params: Params,
        body: Type.Optional(
          Type.Object(
            {
              node: Type.Optional(
                Type.String({
                  minLength: 1,
                  maxLength: 63,
                  description: "the node's name; default: placement chooses",
                }),
              ),
            },
            { additionalProperties: false },
          ),
        ),
        response: { ...commonErrors, ...notFound },
      },
    },
    async (req, reply) => {
      if (req.auth.token.role !== "admin") {
        throw new ApiError(403, ErrorCode.AdminRequired, "only an admin token moves units between nodes");
      }
      const plan = await units.planMove(req.auth.org, req.params.name, req.body?.node);
      await stream(reply, async (progress) => {
        const moved = await units.move(plan, progress);
        return { data: `unit ${req.params.name} moved to node ${moved.node}`, id: moved.checkpoint.id };
      });
    },
  );

  app.get(
    "/:name/checkpoints",
    {
      schema: {
        tags,
        summary:
          dialect === "sprites"
            ? "The unit's checkpoints, oldest first; without includeAuto=true the backups taken before restores are left out under /v1/sprites"
            : "The unit's checkpoints, oldest first",
        params: Params,
        querystring: ListCheckpointsQuery,
        response: { 200: Type.Array(CheckpointInfo), ...commonErrors, ...notFound },
      },
    },
    async (req) => {
      const unit = await units.require(req.auth.org, req.params.name);
      const { history, includeAuto = dialect === "units" } = req.query;
      let cps = await store.checkpoints.list(unit.id);
      if (history !== undefined) cps = lineage(cps, (await units.requireCheckpoint(unit, history)).id);
      if (!includeAuto) cps = cps.filter((c) => !c.auto);
      return infos(unit, cps);
    },
  );

  app.get(
    "/:name/checkpoints/:id",
    {
      schema: {
        tags,
        summary: "One checkpoint",
        params: CpParams,
        response: { 200: CheckpointInfo, ...commonErrors, ...notFound },
      },
    },
    async (req) => {
      const unit = await units.require(req.auth.org, req.params.name);
      return (await infos(unit, [await units.requireCheckpoint(unit, req.params.id)]))[0];
    },
  );

  app.post(
    "/:name/checkpoints/:id/restore",
    {
      schema: {
        tags,
        summary: "Restore the unit to a checkpoint, saving the current state first (NDJSON, spec 6.1 and 3.3)",
        params: CpParams,
        response: { ...commonErrors, ...notFound },
      },
    },
    async (req, reply) => {
      const unit = await units.require(req.auth.org, req.params.name);
      const cp = await units.requireCheckpoint(unit, req.params.id);
      await stream(reply, async (progress) => {
        const backup = await node.restore(req.auth.org, unit, cp, progress);
        units.emit({
          orgId: unit.orgId,
          type: "unit.restored",
          unit: unit.name,
          actor: actorOf(req),
          data: { checkpoint: cp.id, backup: backup.id },
        });
        return {
          data: `restored checkpoint ${cp.id}; the state before is saved as ${backup.id}`,
          id: cp.id,
          backup_id: backup.id,
        };
      });
    },
  );

  app.delete(
    "/:name/checkpoints/:id",
    {
      schema: {
        tags,
        summary: "Delete a checkpoint (not the active one: 409) and free its space",
        params: CpParams,
        response: { 204: Type.Null(), ...commonErrors, ...notFound, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      const unit = await units.require(req.auth.org, req.params.name);
      const cp = await units.requireCheckpoint(unit, req.params.id);
      // The active checkpoint is refused by the node (409 UMS_CHECKPOINT_ACTIVE).
      await node.deleteCheckpoint(unit, cp);
      return reply.code(204).send(null);
    },
  );
}
