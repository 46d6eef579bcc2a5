import type { FastifyRequest } from "fastify";
import { readJson } from "../../node/errors.js";
import type { FsIdentity, UnitLease, UnitNode } from "../../node/unit-node.js";
import type { ApiInstance } from "../instance.js";
import { leaseUnit } from "../unit-access/lease.js";
import type { UnitService } from "../units/service.js";
import { fsOperationRoutes } from "./operations.js";
import { fsTransferRoutes } from "./transfer.js";
import { fsWatchRoute } from "./watch.js";

// Spec 4.4: the filesystem API. The server validates, resolves `workingDir` (paths.ts), wakes the
// unit and hands each operation to the unit's agent, which runs it inside the unit with the
// identity asked for (the unit user, or root with `asRoot`; see packages/agent/src/fs/worker.ts).
// File bodies stream through in both directions. Errors (an errno with its path, spec 4.4) are the
// agent's, answered by the API's one error path (errors/node-errors.ts).

export interface FsDeps {
  readonly units: UnitService;
  readonly node: UnitNode;
}

/** What the feature's routes share: the unit's lease for a request, and JSON operations on it. */
export interface FsRoom {
  readonly deps: FsDeps;
  lease(req: FastifyRequest): Promise<UnitLease>;
  /** One JSON operation: POST /fs/{op} with the resolved body, run as `as`. */
  jsonOp(req: FastifyRequest, op: string, asRoot: boolean | undefined, body: object): Promise<unknown>;
}

export const identity = (asRoot: boolean | undefined): FsIdentity => (asRoot ? "root" : "user");

export function fsRoutes(app: ApiInstance, deps: FsDeps): void {
  const room: FsRoom = {
    deps,
    lease: (req) => leaseUnit(req, deps.units, deps.node),
    async jsonOp(req, op, asRoot, body) {
      const lease = await leaseUnit(req, deps.units, deps.node);
      try {
        const res = await lease.agent.fs(identity(asRoot), "POST", `/fs/${op}`, JSON.stringify(body), {
          "content-type": "application/json",
        });
        return await readJson(res);
      } finally {
        lease.release();
      }
    },
  };
  fsOperationRoutes(app, room);
  fsTransferRoutes(app, room);
  fsWatchRoute(app, room);
}
