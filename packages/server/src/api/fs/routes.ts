import type { Readable } from "node:stream";
import type { FastifyRequest } from "fastify";
import { readJson } from "../../node/errors.js";
import type { FsIdentity, UnitLease, UnitNode } from "../../node/unit-node.js";
import type { Dialect } from "../dialect.js";
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
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly node: UnitNode;
}

/** What the feature's routes share: the unit's lease for a request, and JSON operations on it. */
export interface FsRoom {
  readonly deps: FsDeps;
  lease(req: FastifyRequest): Promise<UnitLease>;
  /** One filesystem request to the unit's agent, run as the unit user or root; its JSON answer. */
  call<T = unknown>(
    req: FastifyRequest,
    asRoot: boolean | undefined,
    method: string,
    path: string,
    body?: Readable | string,
    headers?: Record<string, string>,
  ): Promise<T>;
  /** One JSON operation: POST /fs/{op} with the resolved body. */
  jsonOp(req: FastifyRequest, op: string, asRoot: boolean | undefined, body: object): Promise<unknown>;
}

/**
 * The largest JSON answer of a filesystem operation: a recursive list of up to 10,000 entries
 * (packages/agent/src/fs/entries.ts MAX_LIST) with paths up to PATH_MAX fits (a limit still bounds
 * what an agent, which is the unit's, can make this process hold).
 */
const MAX_FS_ANSWER = 64 * 1024 * 1024;

export const identity = (asRoot: boolean | undefined): FsIdentity => (asRoot ? "root" : "user");

/** One filesystem request to the unit's agent on `lease`, run as the unit user or root; its JSON answer. */
export async function fsJson<T = unknown>(
  lease: UnitLease,
  asRoot: boolean | undefined,
  method: string,
  path: string,
  body?: Readable | string,
  headers?: Record<string, string>,
): Promise<T> {
  return readJson<T>(await lease.agent.fs(identity(asRoot), method, path, body, headers), MAX_FS_ANSWER);
}

export function fsRoutes(app: ApiInstance, deps: FsDeps): void {
  const room: FsRoom = {
    deps,
    lease: (req) => leaseUnit(req, deps.units, deps.node),
    async call(req, asRoot, method, path, body, headers) {
      const lease = await leaseUnit(req, deps.units, deps.node);
      try {
        return await fsJson(lease, asRoot, method, path, body, headers);
      } finally {
        lease.release();
      }
    },
    jsonOp(req, op, asRoot, body) {
      return room.call(req, asRoot, "POST", `/fs/${op}`, JSON.stringify(body), { "content-type": "application/json" });
    },
  };
  fsOperationRoutes(app, room);
  fsTransferRoutes(app, room);
  fsWatchRoute(app, room);
}
