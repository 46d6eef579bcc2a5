import { PrivilegesPolicy, ResourcesPolicy } from "@ums/protocol";
import type { Lifecycle } from "../../lifecycle/lifecycle.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { OrgRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound, UnitParams } from "../schemas.js";
import type { UnitService } from "../units/service.js";

export interface PolicyDeps {
  readonly store: Store;
  readonly units: UnitService;
  readonly lifecycle: Lifecycle;
  readonly runtime: UnitRuntime;
}

/** Defaults a unit gets when its policy says nothing (documented in the OpenAPI descriptions). */
export const DEFAULT_RESOURCES = Object.freeze({ memory: { limit_mb: 2048 }, pids: { limit: 4096 } });
export const DEFAULT_PRIVILEGES = Object.freeze({
  profile: "standard" as const,
  devices: [],
  no_new_privileges: false,
});

const effectiveResources = (json: string): ResourcesPolicy => ({ ...DEFAULT_RESOURCES, ...JSON.parse(json) });
const effectivePrivileges = (json: string): PrivilegesPolicy => ({ ...DEFAULT_PRIVILEGES, ...JSON.parse(json) });

/** Spec 4.5: the resources and privileges policies (network is its own feature). */
export function policyRoutes(app: ApiInstance, { store, units, lifecycle, runtime }: PolicyDeps): void {
  const tags = ["policies"];
  const resources = { 200: ResourcesPolicy, ...commonErrors, ...notFound };
  const privileges = { 200: PrivilegesPolicy, ...commonErrors, ...notFound };

  app.get(
    "/v1/units/:name/policy/resources",
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

  async function setResources(org: OrgRecord, name: string, policy: ResourcesPolicy) {
    const unit = await units.require(org, name);
    await store.units.update(unit.orgId, unit.name, {
      resources: JSON.stringify(policy),
      updatedAt: new Date().toISOString(),
    });
    const effective = effectiveResources(JSON.stringify(policy));
    // Live where the kernel allows; a running unit that refuses (e.g. a limit below its use) gets it at next boot.
    if (lifecycle.statusOf(unit.id) !== "cold") await runtime.applyResources(unit.id, effective);
    return effective;
  }

  app.post(
    "/v1/units/:name/policy/resources",
    {
      schema: {
        tags,
        summary: "Set memory and process limits (live when possible, else at next boot)",
        params: UnitParams,
        body: ResourcesPolicy,
        response: resources,
      },
    },
    async (req) => setResources(req.auth.org, req.params.name, req.body),
  );

  app.delete(
    "/v1/units/:name/policy/resources",
    { schema: { tags, summary: "Revert to the default limits", params: UnitParams, response: resources } },
    async (req) => setResources(req.auth.org, req.params.name, {}),
  );

  app.get(
    "/v1/units/:name/policy/privileges",
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

  async function setPrivileges(org: OrgRecord, name: string, policy: PrivilegesPolicy) {
    const unit = await units.require(org, name);
    await store.units.update(unit.orgId, unit.name, {
      privileges: JSON.stringify(policy),
      updatedAt: new Date().toISOString(),
    });
    return effectivePrivileges(JSON.stringify(policy));
  }

  app.post(
    "/v1/units/:name/policy/privileges",
    {
      schema: {
        tags,
        summary: "Set capabilities profile, devices and no_new_privileges (applies at the unit's next boot)",
        params: UnitParams,
        body: PrivilegesPolicy,
        response: privileges,
      },
    },
    async (req) => setPrivileges(req.auth.org, req.params.name, req.body),
  );

  app.delete(
    "/v1/units/:name/policy/privileges",
    { schema: { tags, summary: "Revert to the default privileges", params: UnitParams, response: privileges } },
    async (req) => setPrivileges(req.auth.org, req.params.name, {}),
  );
}
