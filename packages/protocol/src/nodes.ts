import { type Static, Type } from "@sinclair/typebox";

/**
 * Issue #15 (docs/SCALE-OUT.md "Nodes"): whether placement may give a node new units. Down is not
 * a state: it is read from the heartbeat's age (`up`).
 */
export const NodeState = Type.Union([Type.Literal("active"), Type.Literal("cordoned"), Type.Literal("draining")], {
  description:
    "Set by an operator: `active` takes new units; `cordoned` takes none, its units stay (`ums node cordon`); `draining`: its units are being moved off it",
});
export type NodeState = Static<typeof NodeState>;

const Bytes = (description: string) => Type.Integer({ minimum: 0, description });
const At = (description: string) => Type.String({ format: "date-time", description });

/**
 * Issue #15 `GET /v1/nodes` (admin tokens): a host that runs units, as it registered and as its
 * last heartbeat found it. The figures are those of `ums node list --json`; the node's endpoint
 * address (an internal network detail) is not given.
 */
export const Node = Type.Object(
  {
    id: Type.String({ description: "`node-<uuid>`, kept in the node's data dir" }),
    name: Type.String({ description: "Unique among the nodes of the database (`--node-name`)" }),
    up: Type.Boolean({
      description: "Whether its last heartbeat is recent enough (15 s: three missed heartbeats make it down)",
    }),
    state: NodeState,
    status: Type.String({
      description: "`up` or `down`, with the state when it is not `active`: `up`, `down`, `up, cordoned`",
    }),
    units: Type.Integer({ minimum: 0, description: "How many units (of every organization) it holds" }),
    unit_slots: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: "The most units it takes (`--node-units`); null: no count, memory and disk decide",
    }),
    cpus: Type.Number({ description: "Its CPUs" }),
    memory_bytes: Bytes("Its memory"),
    memory_free_bytes: Bytes("Memory available at its last heartbeat"),
    disk_bytes: Bytes("The size of its unit pool"),
    disk_free_bytes: Bytes("The pool's free space at its last heartbeat"),
    labels: Type.Record(Type.String(), Type.String(), {
      description: "`--node-labels`, matched by placement",
    }),
    version: Type.String({ description: "The ums version it runs" }),
    created_at: At("When it registered first"),
    started_at: At("When its process last started"),
    heartbeat_at: At("Its last heartbeat (every 5 s while it runs)"),
    heartbeat_age_seconds: Type.Number({
      minimum: 0,
      description: "Seconds since its last heartbeat, by the server's clock when it answered",
    }),
  },
  { title: "Node" },
);
export type Node = Static<typeof Node>;

export const NodeList = Type.Object(
  { nodes: Type.Array(Node, { description: "Every node of the database, by name" }) },
  { title: "NodeList" },
);
export type NodeList = Static<typeof NodeList>;
