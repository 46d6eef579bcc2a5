import { ErrorCode, NetworkLog, NetworkLogQuery, NetworkPolicy } from "@ums/protocol";
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
export function networkPolicyRoutes(app: ApiInstance, { units, node }: NetworkPolicyDeps): void {
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
        summary: "Replace the unit's network policy (in force at once; open connections it forbids are cut)",
        description: MATCHING,
        params: UnitParams,
        body: NetworkPolicy,
        response: { 200: NetworkPolicy, ...commonErrors, ...notFound },
      },
    },
    async (req) => {
      const unit = await units.require(req.auth.org, req.params.name);
      const compiled = CompiledPolicy.compile(req.body);
      if (!(compiled instanceof CompiledPolicy)) {
        throw new ApiError(400, ErrorCode.NetworkPolicyInvalid, compiled.errors.join("; "), compiled.errors);
      }
      const json = JSON.stringify({ rules: req.body.rules } satisfies NetworkPolicy);
      await units.setPolicy(unit, { network: json });
      // In force at once when the unit runs: its resolver and firewall follow the new rules.
      return node.applyNetworkPolicy(unit.id, json).then(() => JSON.parse(json) as NetworkPolicy);
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
