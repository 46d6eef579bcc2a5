import { Type } from "@sinclair/typebox";
import { ErrorBody, ErrorCode, Node, NodeList } from "@ums/protocol";
import { nodeIsUp, nodeStatus } from "../../node/registry/liveness.js";
import type { NodeUse, Store } from "../../store/store.js";
import type { AuthContext } from "../auth.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors } from "../schemas.js";

const Params = Type.Object({ name: Type.String({ maxLength: 256 }) });
const tags = ["nodes"];

/** A node as the API shows it: `ums node list --json`'s figures without its endpoint address. */
export function presentNode({ node: n, units }: NodeUse, now: number): Node {
  const up = nodeIsUp(n, now);
  return {
    id: n.id,
    name: n.name,
    up,
    state: n.state,
    status: nodeStatus(n, now),
    units,
    unit_slots: n.capacity.unitSlots,
    cpus: n.capacity.cpus,
    memory_bytes: n.capacity.memoryBytes,
    memory_free_bytes: n.free.memoryBytes,
    disk_bytes: n.capacity.diskBytes,
    disk_free_bytes: n.free.diskBytes,
    labels: { ...n.labels },
    version: n.version,
    created_at: n.createdAt,
    started_at: n.startedAt,
    heartbeat_at: n.heartbeatAt,
    heartbeat_age_seconds: Math.max(0, Math.round((now - Date.parse(n.heartbeatAt)) / 100) / 10),
  };
}

/** The nodes serve every organization: an admin token of any organization reads them, as it reads the metrics. */
function requireAdmin(auth: AuthContext): void {
  if (auth.token.role !== "admin") {
    throw new ApiError(403, ErrorCode.AdminRequired, "only an admin token reads the nodes");
  }
}

/**
 * Issue #15 (docs/SCALE-OUT.md "Nodes"): the hosts that run units, for admin tokens: what
 * `ums node list` shows, over the API (and the console's Nodes page).
 */
export function nodeRoutes(app: ApiInstance, store: Store): void {
  app.get(
    "/v1/nodes",
    {
      schema: {
        tags,
        summary:
          "Every node (host that runs units): up or down by its heartbeat, its state, its units, capacity and what it has free (admin tokens only)",
        response: { 200: NodeList, ...commonErrors, 403: ErrorBody },
      },
    },
    async (req, reply) => {
      requireAdmin(req.auth);
      const now = Date.now();
      const rows = (await store.nodes.usage("")).sort((a, b) => (a.node.name < b.node.name ? -1 : 1));
      reply.header("cache-control", "no-store");
      return { nodes: rows.map((r) => presentNode(r, now)) };
    },
  );

  app.get(
    "/v1/nodes/:name",
    {
      schema: {
        tags,
        summary: "One node, by name (admin tokens only)",
        params: Params,
        response: { 200: Node, ...commonErrors, 403: ErrorBody, 404: ErrorBody },
      },
    },
    async (req, reply) => {
      requireAdmin(req.auth);
      const now = Date.now();
      const row = (await store.nodes.usage("")).find((r) => r.node.name === req.params.name);
      if (!row) {
        throw new ApiError(
          404,
          ErrorCode.NodeNotFound,
          `no node is named '${req.params.name}' (GET /v1/nodes lists them)`,
        );
      }
      reply.header("cache-control", "no-store");
      return presentNode(row, now);
    },
  );
}
