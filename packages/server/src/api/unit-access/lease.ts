import type { FastifyRequest } from "fastify";
import type { UnitLease, UnitNode } from "../../node/unit-node.js";
import type { UnitService } from "../units/service.js";

/**
 * The step every request to a unit's inside takes: the caller's unit by name (404 for another
 * organization's, spec section 7), woken by its node and held awake until the lease is released.
 * The node's errors (a running limit, a boot that failed) are answered by `sendError`.
 */
export async function leaseUnit(req: FastifyRequest, units: UnitService, node: UnitNode): Promise<UnitLease> {
  const { name } = req.params as { name: string };
  const unit = await units.require(req.auth.org, name);
  return node.wake(req.auth.org, unit);
}

/**
 * The first call of a request on its lease: when it fails, the unit is released (the request
 * answers an error and holds nothing); when it succeeds, the lease is the caller's to release.
 */
export async function firstCall<T>(lease: UnitLease, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    lease.release();
    throw err;
  }
}
