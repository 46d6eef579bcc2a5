import { type TNull, Type } from "@sinclair/typebox";
import { ErrorCode, NetworkLog, NetworkLogQuery, NetworkPolicy } from "@ums/protocol";
import { actorOf } from "../../events/actor.js";
import { CompiledPolicy } from "../../network/matching.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound, UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";

export interface NetworkPolicyDeps {
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly node: UnitNode;
}

const MATCHING =
  'Rules are matched by specificity: an exact name beats *.sub.example beats *.example beats *; among equally specific rules the later one wins. With any rule present, a name no rule matches is refused and connections to addresses no allowed lookup produced are dropped; private, loopback and link-local ranges are never reachable. {"rules": []} (the default) enforces nothing.';

/** Spec 4.5 (network) and 2.10; the decisions log is ours (issue #6). */
export function networkPolicyRoutes(app: ApiInstance, { units, node, dialect }: NetworkPolicyDeps): void {
  const tags = ["policies"];
  app.get(
    "/:name/policy/network",
    {
      schema: {
        tags,
        summary: "The unit's network policy",
        description: MATCHING,
        params: UnitParams,
        response: { 200: NetworkPolicy, ...commonErrors, ...notFound },
      },
    },
    async (req) => JSON.parse((await units.require(req.auth.org, req.params.name)).network) as NetworkPolicy,
  );

  app.post(
    "/:name/policy/network",
    {
      schema: {
        tags,
        summary:
          dialect === "sprites"
            ? "Replace the unit's network policy; answers 204 with no body under /v1/sprites (the Sprites clients' shape)"
            : "Replace the unit's network policy (in force at once; open connections it forbids are cut)",
        description: MATCHING,
        params: UnitParams,
        body: NetworkPolicy,
        // One type for both (the handler answers by dialect); each dialect documents its own.
        response: (dialect === "sprites"
          ? { 204: Type.Null(), ...commonErrors, ...notFound }
          : { 200: NetworkPolicy, ...commonErrors, ...notFound }) as {
          200: typeof NetworkPolicy;
          204: TNull;
        } & typeof commonErrors &
          typeof notFound,
      },
    },
    async (req, reply) => {
      const unit = await units.require(req.auth.org, req.params.name);
      const compiled = CompiledPolicy.compile(req.body);
      if (!(compiled instanceof CompiledPolicy)) {
        throw new ApiError(400, ErrorCode.NetworkPolicyInvalid, compiled.errors.join("; "), compiled.errors);
      }
      const json = JSON.stringify({ rules: req.body.rules } satisfies NetworkPolicy);
      await units.setPolicy(unit, { network: json }, actorOf(req));
      // In force at once when the unit runs: its resolver and firewall follow the new rules.
      await node.applyNetworkPolicy(unit.id, json);
      if (dialect === "sprites") return reply.code(204).send(null);
      return JSON.parse(json) as NetworkPolicy;
    },
  );

  app.get(
    "/:name/policy/network/log",
    {
      schema: {
        tags,
        summary: "Why lookups and connections failed: counts and the resolver's recent decisions",
        description:
          "denied_lookups counts lookups refused since the server started; dropped_packets counts packets the unit's egress rules dropped or reset since it last booted; decisions are the last `limit` lookups (name, type, verdict, deciding rule, allowed addresses), oldest first, kept in memory.",
        params: UnitParams,
        querystring: NetworkLogQuery,
        response: { 200: NetworkLog, ...commonErrors, ...notFound },
      },
    },
    async (req) => {
      const unit = await units.require(req.auth.org, req.params.name);
      return node.networkReport(unit.id, req.query.limit ?? 100);
    },
  );
}
