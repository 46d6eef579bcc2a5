import type { Readable } from "node:stream";
import type { ImageRecipe, NetworkLog } from "@ums/protocol";
import type { AgentTimeouts } from "../agent/deadline.js";
import type { ResourceLimits, ResourcesPolicy } from "../runtime/runtime.js";
import type {
  CheckpointRecord,
  ImageRecord,
  NodeRecord,
  OrgRecord,
  TemplateRecord,
  UnitRecord,
  UnitStatus,
} from "../store/records.js";
import type { Store } from "../store/store.js";
import { UnitDeletedError, UnitUnavailableError } from "./errors.js";
import { DOWN_AFTER_MS, nodeIsUp } from "./registry/liveness.js";
import { type NodeAddress, NodeUnreachableError, RemoteNode } from "./remote/remote-node.js";
import type { CheckpointResult, Progress, UnitHealth, UnitLease, UnitNode, WakeOpts } from "./unit-node.js";

/** How long a node's row (its address, its liveness) is taken as read before it is read again. */
const ROW_TTL_MS = 2_000;

/** `host:port` of a node's endpoint (the nodes table's `address`), split; undefined when it has none. */
export function parseNodeAddress(address: string): { host: string; port: number } | undefined {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(address);
  if (!m) return undefined;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1] as string, port } : undefined;
}

/**
 * Issue #15 (docs/SCALE-OUT.md): the API's node seam when units live on more than one node. Each
 * call goes to the node that holds its unit (units.node_id): this process's own node, or a remote
 * one over its endpoint (remote/). A unit whose node is down is unavailable until it is back.
 * Calls that concern no unit (an image to import, the base image) go to this process's node when it
 * has one, otherwise to a node that is up.
 */
export class NodeDirectory implements UnitNode {
  private readonly remotes = new Map<string, { node: RemoteNode; row: NodeRecord; at: number }>();
  /** When this process last failed to reach each node (until it reaches it again). */
  private readonly unreached = new Map<string, number>();
  private readonly reach = {
    unreachable: (id: string) => this.unreached.set(id, Date.now()),
    reached: (id: string) => this.unreached.delete(id),
  };

  /**
   * Whether this process failed to reach the node within the time a node takes to count as down:
   * placement keeps new units away from it meanwhile (a stopped node's heartbeat is still fresh).
   */
  recentlyUnreachable(nodeId: string, now = Date.now()): boolean {
    const at = this.unreached.get(nodeId);
    if (at === undefined) return false;
    if (now - at <= DOWN_AFTER_MS) return true;
    this.unreached.delete(nodeId);
    return false;
  }

  constructor(
    private readonly store: Store,
    private readonly local: { readonly id: string; readonly node: UnitNode } | undefined,
    private readonly secret: string,
    private readonly timeouts: AgentTimeouts,
  ) {}

  /** The node of id `nodeId` (null: a unit from before nodes, on this process's node). */
  async of(nodeId: string | null): Promise<UnitNode> {
    if (this.local && (nodeId === null || nodeId === this.local.id)) return this.local.node;
    if (nodeId === null) throw new UnitUnavailableError("the unit names no node and this process runs none");
    const now = Date.now();
    let entry = this.remotes.get(nodeId);
    if (!entry || now - entry.at > ROW_TTL_MS) {
      const row = await this.store.nodes.get(nodeId);
      if (!row) throw new UnitUnavailableError(`the unit's node ${nodeId} was removed`);
      const addr = parseNodeAddress(row.address);
      if (!addr) throw new UnitUnavailableError(`node '${row.name}' has no endpoint address this process can reach`);
      const address: NodeAddress = { id: row.id, name: row.name, ...addr, secret: this.secret };
      const same = entry && entry.row.address === row.address;
      if (entry && !same) entry.node.close();
      entry = {
        node: same && entry ? entry.node : new RemoteNode(address, this.timeouts, this.reach),
        row,
        at: now,
      };
      this.remotes.set(nodeId, entry);
    }
    if (!nodeIsUp(entry.row, now)) {
      throw new NodeUnreachableError(
        `node '${entry.row.name}' is down (no heartbeat since ${entry.row.heartbeatAt}); its units are unavailable until it is back`,
        entry.row.id,
      );
    }
    return entry.node;
  }

  private async ofUnitId(unitId: string): Promise<UnitNode> {
    const unit = await this.store.units.getById(unitId);
    if (!unit) throw new UnitDeletedError(unitId);
    return this.of(unit.nodeId);
  }

  /** This process's node, or any node that is up (for calls that concern no unit). */
  private async any(): Promise<UnitNode> {
    if (this.local) return this.local.node;
    const now = Date.now();
    const up = (await this.store.nodes.list()).filter((n) => n.state === "active" && nodeIsUp(n, now) && n.address);
    const pick = up[Math.floor(Math.random() * up.length)];
    if (!pick) throw new UnitUnavailableError("no node is up");
    return this.of(pick.id);
  }

  async status(unitId: string): Promise<UnitStatus> {
    return (await this.ofUnitId(unitId)).status(unitId);
  }
  async create(unit: UnitRecord): Promise<void> {
    return (await this.of(unit.nodeId)).create(unit);
  }
  async fork(source: UnitRecord, checkpoint: CheckpointRecord, unit: UnitRecord): Promise<void> {
    return (await this.of(unit.nodeId)).fork(source, checkpoint, unit);
  }
  async publishTemplate(
    source: UnitRecord,
    checkpoint: CheckpointRecord,
    what: { name: string; description: string },
  ): Promise<TemplateRecord> {
    return (await this.of(source.nodeId)).publishTemplate(source, checkpoint, what);
  }
  async deleteTemplate(template: TemplateRecord): Promise<void> {
    return (await this.of(holder(template))).deleteTemplate(template);
  }
  async fromTemplate(template: TemplateRecord, unit: UnitRecord): Promise<void> {
    return (await this.of(unit.nodeId)).fromTemplate(template, unit);
  }
  async importImage(
    org: OrgRecord,
    name: string,
    body: Readable,
    hooks: { progress: Progress; signal?: AbortSignal },
  ): Promise<ImageRecord> {
    return (await this.any()).importImage(org, name, body, hooks);
  }
  async buildImage(
    org: OrgRecord,
    recipe: ImageRecipe,
    source: string,
    hooks: {
      progress: Progress;
      signal?: AbortSignal;
      steps?: (draftId: string) => Promise<{ unitId: string; checkpoint: string }>;
    },
  ): Promise<ImageRecord> {
    return (await this.any()).buildImage(org, recipe, source, hooks);
  }
  async fillDraft(imageId: string, unit: UnitRecord): Promise<void> {
    return (await this.of(unit.nodeId)).fillDraft(imageId, unit);
  }
  async baseImage(): Promise<{ readonly bytes: number; readonly builtAt: string }> {
    return (await this.any()).baseImage();
  }
  async deleteImage(image: ImageRecord): Promise<void> {
    return (await this.of(holder(image))).deleteImage(image);
  }
  async fromImage(image: ImageRecord, unit: UnitRecord): Promise<void> {
    return (await this.of(unit.nodeId)).fromImage(image, unit);
  }
  async destroy(unit: UnitRecord): Promise<boolean> {
    return (await this.of(unit.nodeId)).destroy(unit);
  }
  /** A unit whose node is down or cannot be reached is unhealthy, and the reason names the node. */
  async health(unit: UnitRecord): Promise<UnitHealth> {
    try {
      return await (await this.of(unit.nodeId)).health(unit);
    } catch (err) {
      if (err instanceof UnitUnavailableError) return { status: "unhealthy", reason: err.message };
      throw err;
    }
  }
  async wake(org: OrgRecord, unit: UnitRecord, opts?: WakeOpts): Promise<UnitLease> {
    return (await this.of(unit.nodeId)).wake(org, unit, opts);
  }
  async checkpoint(unit: UnitRecord, comment: string, progress: Progress): Promise<CheckpointResult> {
    return (await this.of(unit.nodeId)).checkpoint(unit, comment, progress);
  }
  async restore(
    org: OrgRecord,
    unit: UnitRecord,
    checkpoint: CheckpointRecord,
    progress: Progress,
  ): Promise<CheckpointRecord> {
    return (await this.of(unit.nodeId)).restore(org, unit, checkpoint, progress);
  }
  async upgrade(org: OrgRecord, unit: UnitRecord, to: ImageRecord, progress: Progress): Promise<CheckpointRecord> {
    return (await this.of(unit.nodeId)).upgrade(org, unit, to, progress);
  }
  async deleteCheckpoint(unit: UnitRecord, checkpoint: CheckpointRecord): Promise<void> {
    return (await this.of(unit.nodeId)).deleteCheckpoint(unit, checkpoint);
  }
  async checkpointsPresent(
    unitId: string,
    ids: readonly string[],
    replicated?: ReadonlySet<string>,
  ): Promise<ReadonlySet<string>> {
    try {
      return await (await this.ofUnitId(unitId)).checkpointsPresent(unitId, ids, replicated);
    } catch (err) {
      // The listing answers while the unit's node is down: what the store holds can be restored.
      if (err instanceof UnitUnavailableError) return new Set(ids.filter((id) => replicated?.has(id)));
      throw err;
    }
  }
  async moveOut(unit: UnitRecord, progress: Progress): Promise<CheckpointRecord> {
    return (await this.of(unit.nodeId)).moveOut(unit, progress);
  }
  async moveDone(unit: UnitRecord): Promise<void> {
    return (await this.of(unit.nodeId)).moveDone(unit);
  }
  async moveAborted(unit: UnitRecord): Promise<void> {
    return (await this.of(unit.nodeId)).moveAborted(unit);
  }
  /** On the node `unit.nodeId` names: the caller passes the record as it will be once moved. */
  async moveIn(unit: UnitRecord, checkpoint: CheckpointRecord, progress: Progress, from?: string): Promise<void> {
    return (await this.of(unit.nodeId)).moveIn(unit, checkpoint, progress, from);
  }
  async resourceLimits(): Promise<ResourceLimits> {
    return (await this.any()).resourceLimits();
  }
  async applyResources(unitId: string, resources: ResourcesPolicy): Promise<boolean> {
    return (await this.ofUnitId(unitId)).applyResources(unitId, resources);
  }
  async applyNetworkPolicy(unitId: string, policyJson: string): Promise<void> {
    return (await this.ofUnitId(unitId)).applyNetworkPolicy(unitId, policyJson);
  }
  async networkReport(unitId: string, limit: number): Promise<NetworkLog> {
    return (await this.ofUnitId(unitId)).networkReport(unitId, limit);
  }
}

/** The node that holds a template's or an image's files (null: from before nodes, this process's). */
function holder(x: TemplateRecord | ImageRecord): string | null {
  return (x as { nodeId?: string | null }).nodeId ?? null;
}
