import { PrivilegesPolicy, ResourcesPolicy } from "@ums/protocol";
import { type Actor, actorOf } from "../../events/actor.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { OrgRecord } from "../../store/records.js";
import { KeyedMutex } from "../../util/keyed-mutex.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound, UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";

export interface PolicyDeps {
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly node: UnitNode;
}

export const DEFAULT_PRIVILEGES = Object.freeze({
  profile: "standard" as const,
  devices: [],
  no_new_privileges: false,
});

const effectivePrivileges = (json: string): PrivilegesPolicy => ({ ...DEFAULT_PRIVILEGES, ...JSON.parse(json) });

/** Spec 4.5: the resources and privileges policies (network is its own feature). */
export function policyRoutes(app: ApiInstance, { units, node }: PolicyDeps): void {
  const tags = ["policies"];
  /** The limits in force: the policy's, and the server's defaults (the node's) for the rest. */
  const effectiveResources = async (json: string): Promise<ResourcesPolicy> => ({
    ...(await node.resourceLimits()).defaults,
    ...(JSON.parse(json) as ResourcesPolicy),
  });
  const resourceChanges = new KeyedMutex();
  const resources = { 200: ResourcesPolicy, ...commonErrors, ...notFound };
  const privileges = { 200: PrivilegesPolicy, ...commonErrors, ...notFound };

  app.get(
    "/:name/policy/resources",
    {
      schema: {
        tags,
        summary: "The unit's resources policy, defaults filled in",
        params: UnitParams,
        response: resources,
      },
    },
    async (req) => effectiveResources((await units.require(req.auth.org, req.params.name)).resources),
  );

  /** Spec 4.5: a POST changes the limits it names and keeps the others (`replace`: DELETE, all go). */
  async function setResources(actor: Actor, org: OrgRecord, name: string, change: ResourcesPolicy, replace = false) {
    const max = (await node.resourceLimits()).maxCpuCores;
    if (change.cpu && change.cpu.cores > max) {
      throw ApiError.validation([
        `cpu.cores: must be at most ${max}, the cores units may use on this host (it keeps the rest for ums); got ${change.cpu.cores}`,
      ]);
    }
    const found = await units.require(org, name);
    // One change at a time per unit: two POSTs naming different limits both stay.
    return resourceChanges.run(found.id, async () => {
      const unit = await units.require(org, name);
      const policy: ResourcesPolicy = replace
        ? change
        : { ...(JSON.parse(unit.resources) as ResourcesPolicy), ...change };
      await units.setPolicy(unit, { resources: JSON.stringify(policy) }, actor);
      const effective = await effectiveResources(JSON.stringify(policy));
      // Live where the kernel allows; a running unit that refuses (e.g. a limit below its use) gets it at next boot.
      await node.applyResources(unit.id, effective);
      return effective;
    });
  }

  app.post(
    "/:name/policy/resources",
    {
      schema: {
        tags,
        summary: "Set memory, process and CPU limits (live when possible, else at next boot)",
        description:
          "Changes the limits the body names and keeps the others (a body with only `memory` leaves `pids` and `cpu` as they were); DELETE reverts all of them to the server's defaults. A limit never set is the server's default (out of the box: 1,024 processes, 1 core and 2 GiB of memory). `cpu.cores` is CPU time as a CFS quota, e.g. 0.5 or 2, at most what units may use on the host (its cores less half a core kept for ums).",
        params: UnitParams,
        body: ResourcesPolicy,
        response: resources,
      },
    },
    async (req) => setResources(actorOf(req), req.auth.org, req.params.name, req.body),
  );

  app.delete(
    "/:name/policy/resources",
    { schema: { tags, summary: "Revert to the default limits", params: UnitParams, response: resources } },
    async (req) => setResources(actorOf(req), req.auth.org, req.params.name, {}, true),
  );

  app.get(
    "/:name/policy/privileges",
    {
      schema: {
        tags,
        summary: "The unit's privileges policy, defaults filled in",
        params: UnitParams,
        response: privileges,
      },
    },
    async (req) => effectivePrivileges((await units.require(req.auth.org, req.params.name)).privileges),
  );

  async function setPrivileges(actor: Actor, org: OrgRecord, name: string, policy: PrivilegesPolicy) {
    const unit = await units.require(org, name);
    await units.setPolicy(unit, { privileges: JSON.stringify(policy) }, actor);
    return effectivePrivileges(JSON.stringify(policy));
  }

  app.post(
    "/:name/policy/privileges",
    {
      schema: {
        tags,
        summary: "Set capabilities profile, devices and no_new_privileges (applies at the unit's next boot)",
        params: UnitParams,
        body: PrivilegesPolicy,
        response: privileges,
      },
    },
    async (req) => setPrivileges(actorOf(req), req.auth.org, req.params.name, req.body),
  );

  app.delete(
    "/:name/policy/privileges",
    { schema: { tags, summary: "Revert to the default privileges", params: UnitParams, response: privileges } },
    async (req) => setPrivileges(actorOf(req), req.auth.org, req.params.name, {}),
  );
}
