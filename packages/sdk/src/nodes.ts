import type { Node as WireNode, NodeList as WireNodeList } from "@ums/protocol";
import type { UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";

/**
 * A node (issue #15): a host that runs units, as it registered and as its last heartbeat found it
 * (what `ums node list` shows). Its endpoint address is not given.
 */
export interface NodeInfo {
  /** `node-<uuid>`. */
  id: string;
  name: string;
  /** Whether its last heartbeat is recent enough (15 s) for it to count as up. */
  up: boolean;
  /** Set by an operator: `active` takes new units, `cordoned` takes none; `draining`: its units are moving off it. */
  state: WireNode["state"];
  /** `up` or `down`, with the state when it is not `active` (`up, cordoned`). */
  status: string;
  /** How many units, of every organization, it holds. */
  units: number;
  /** The most units it takes; null: no count (memory and disk decide). */
  unitSlots: number | null;
  cpus: number;
  memoryBytes: number;
  /** At its last heartbeat. */
  memoryFreeBytes: number;
  /** The size of its unit pool. */
  diskBytes: number;
  /** At its last heartbeat. */
  diskFreeBytes: number;
  labels: Record<string, string>;
  /** The ums version it runs. */
  version: string;
  createdAt: Date;
  startedAt: Date;
  heartbeatAt: Date;
  /** Seconds since its last heartbeat, by the server's clock when it answered. */
  heartbeatAgeSeconds: number;
}

function fromWire(n: WireNode): NodeInfo {
  return {
    id: n.id,
    name: n.name,
    up: n.up,
    state: n.state,
    status: n.status,
    units: n.units,
    unitSlots: n.unit_slots,
    cpus: n.cpus,
    memoryBytes: n.memory_bytes,
    memoryFreeBytes: n.memory_free_bytes,
    diskBytes: n.disk_bytes,
    diskFreeBytes: n.disk_free_bytes,
    labels: { ...n.labels },
    version: n.version,
    createdAt: new Date(n.created_at),
    startedAt: new Date(n.started_at),
    heartbeatAt: new Date(n.heartbeat_at),
    heartbeatAgeSeconds: n.heartbeat_age_seconds,
  };
}

const request = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });

/**
 * `client.nodes`: the hosts that run units (issue #15), for admin tokens. A member token throws
 * `UmsError` with code `UMS_ADMIN_REQUIRED` (status 403); an unknown name `NotFoundError`
 * (`UMS_NODE_NOT_FOUND`).
 */
export class Nodes {
  constructor(private readonly client: UmsClient) {}

  /** Every node, by name. */
  async list(opts: RequestOpts = {}): Promise<NodeInfo[]> {
    const r = await this.client.request<WireNodeList>("GET", "/v1/nodes", request(opts));
    return r.nodes.map(fromWire);
  }

  async get(name: string, opts: RequestOpts = {}): Promise<NodeInfo> {
    return fromWire(await this.client.request<WireNode>("GET", `/v1/nodes/${encodeURIComponent(name)}`, request(opts)));
  }
}
