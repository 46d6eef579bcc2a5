import type { FastifyRequest } from "fastify";
import type { UnitLease, UnitNode, WakeOpts } from "../../node/unit-node.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";
import type { UnitService } from "../units/service.js";

/**
 * The step every request to a unit's inside takes: the caller's unit by name (404 for another
 * organization's, spec section 7), woken by its node and held awake until the lease is released.
 * The node's errors (a running limit, a boot that failed) are answered by `sendError`.
 */
export async function leaseUnit(req: FastifyRequest, units: UnitService, node: UnitNode): Promise<UnitLease> {
  const { name } = req.params as { name: string };
  const unit = await units.require(req.auth.org, name);
  return wakeFor(req, node, req.auth.org, unit);
}

/**
 * Wakes the unit for a request. A unit created with `wait_for_capacity` may wait for a running
 * slot (issue #16, docs/ARCHITECTURE.md section 5): its wake leaves the queue when the request's
 * connection closes meanwhile, so that a client gone holds no place and takes no slot.
 */
export async function wakeFor(
  req: FastifyRequest,
  node: UnitNode,
  org: OrgRecord,
  unit: UnitRecord,
  opts: WakeOpts = {},
): Promise<UnitLease> {
  if (!unit.waitForCapacity) return node.wake(org, unit, opts);
  const socket = req.raw.socket;
  const gone = new AbortController();
  const abort = () => gone.abort();
  socket.once("close", abort);
  if (socket.destroyed) abort();
  try {
    return await node.wake(org, unit, { ...opts, signal: gone.signal });
  } finally {
    socket.off("close", abort);
  }
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
