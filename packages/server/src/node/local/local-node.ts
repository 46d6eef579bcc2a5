import type { Readable } from "node:stream";
import type { ImageRecipe, NetworkLog } from "@ums/protocol";
import type { AgentEndpoint } from "../../agent/deadline.js";
import { RunningLimitError, UnitDeletedError, UnitMovingError } from "../../lifecycle/errors.js";
import type { Lifecycle } from "../../lifecycle/lifecycle.js";
import { type LifecycleOp, metrics } from "../../metrics/server-metrics.js";
import type { NetworkEgress } from "../../network/egress.js";
import type { ResourceLimits, ResourcesPolicy, UnitRuntime } from "../../runtime/runtime.js";
import type {
  CheckpointRecord,
  ImageRecord,
  OrgRecord,
  TemplateRecord,
  UnitRecord,
  UnitStatus,
} from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { UnitStartError, UnitUnavailableError } from "../errors.js";
import type { CheckpointResult, Progress, UnitHealth, UnitLease, UnitNode } from "../unit-node.js";
import { agentEndpoint } from "./agent-endpoint.js";
import type { HttpTargets } from "./http-targets.js";
import type { HostSockets } from "./internal-api/host-sockets.js";
import { LocalLease } from "./lease.js";
import type { Replicator } from "./replicator.js";

/** How long a wake of a unit created with `wait_for_capacity` waits for a running slot. */
export const CAPACITY_WAIT_MS = 60_000;
/** Tries again at least this often while it waits (deletes and stops free slots without a release). */
const CAPACITY_RETRY_MS = 1_000;

/** Observes how long `op` took (issue #17 metrics); a failure is counted, and thrown on. */
async function timed<T>(op: LifecycleOp, work: Promise<T>): Promise<T> {
  const t0 = performance.now();
  try {
    const out = await work;
    metrics.operation(op, (performance.now() - t0) / 1000);
    return out;
  } catch (err) {
    metrics.operationFailed(op);
    throw err;
  }
}

/**
 * The node in this process: units run on this host (runtime/), move through their lifecycle
 * (lifecycle/), have their DNS and egress policy served (network/), and call ums from inside over
 * their internal API (internal-api/). open.ts puts it together.
 */
export class LocalNode implements UnitNode {
  readonly store: Store;
  readonly runtime: UnitRuntime;
  readonly lifecycle: Lifecycle;
  readonly egress: NetworkEgress;
  readonly httpTargets: HttpTargets;
  private readonly hostSockets: HostSockets;
  private readonly serviceEvents: { closeAll(): void } | undefined;
  /** Issue #15: copies checkpoints to the object store, when there is one. */
  readonly replicator: Replicator | undefined;
  private closing: Promise<void> | undefined;

  constructor(parts: {
    store: Store;
    runtime: UnitRuntime;
    lifecycle: Lifecycle;
    egress: NetworkEgress;
    httpTargets: HttpTargets;
    hostSockets: HostSockets;
    /** Issue #17: the follows of running units' service events (events/service-events.ts). */
    serviceEvents?: { closeAll(): void };
    replicator?: Replicator;
  }) {
    this.store = parts.store;
    this.runtime = parts.runtime;
    this.lifecycle = parts.lifecycle;
    this.egress = parts.egress;
    this.httpTargets = parts.httpTargets;
    this.hostSockets = parts.hostSockets;
    this.serviceEvents = parts.serviceEvents;
    this.replicator = parts.replicator;
  }

  /** Stops the idle sweep and closes what the node serves; units keep running (a restart re-adopts them). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.replicator?.close();
      await this.lifecycle.stop();
      this.serviceEvents?.closeAll();
      await this.hostSockets.closeAll();
      await this.egress.closeAll();
    })();
    return this.closing;
  }

  async status(unitId: string): Promise<UnitStatus> {
    return this.lifecycle.statusOf(unitId);
  }

  async create(unit: UnitRecord): Promise<void> {
    this.lifecycle.create(unit);
  }

  fork(source: UnitRecord, checkpoint: CheckpointRecord, unit: UnitRecord): Promise<void> {
    return timed("fork", this.lifecycle.checkpoints.fork(source, checkpoint, unit));
  }

  publishTemplate(
    source: UnitRecord,
    checkpoint: CheckpointRecord,
    what: { name: string; description: string },
  ): Promise<TemplateRecord> {
    return this.lifecycle.templates.publish(source, checkpoint, what);
  }

  async deleteTemplate(template: TemplateRecord): Promise<void> {
    await this.lifecycle.templates.delete(template);
    if (template.imageId !== null) await this.lifecycle.images.pruneQuietly();
  }

  importImage(
    org: OrgRecord,
    name: string,
    body: Readable,
    hooks: { progress: Progress; signal?: AbortSignal },
  ): Promise<ImageRecord> {
    return this.lifecycle.images.import(org.id, name, body, hooks);
  }

  buildImage(
    org: OrgRecord,
    recipe: ImageRecipe,
    source: string,
    hooks: {
      progress: Progress;
      signal?: AbortSignal;
      steps?: (draftId: string) => Promise<{ unitId: string; checkpoint: string }>;
    },
  ): Promise<ImageRecord> {
    return this.lifecycle.images.build(org.id, recipe, source, hooks);
  }

  fillDraft(imageId: string, unit: UnitRecord): Promise<void> {
    return this.lifecycle.images.fillDraft(imageId, unit);
  }

  baseImage(): Promise<{ bytes: number; builtAt: string }> {
    return this.runtime.baseImage();
  }

  deleteImage(image: ImageRecord): Promise<void> {
    return this.lifecycle.images.delete(image);
  }

  fromImage(image: ImageRecord, unit: UnitRecord): Promise<void> {
    return this.lifecycle.images.fill(image, unit);
  }

  fromTemplate(template: TemplateRecord, unit: UnitRecord): Promise<void> {
    return this.lifecycle.templates.fill(template, unit);
  }

  async destroy(unit: UnitRecord): Promise<boolean> {
    const dropped = await this.lifecycle.destroy(unit, () => this.store.units.delete(unit.orgId, unit.name));
    if (unit.imageId !== null) await this.lifecycle.images.pruneQuietly();
    await this.replicator?.unitDeleted(unit.id);
    return dropped;
  }

  health(unit: UnitRecord): Promise<UnitHealth> {
    return this.lifecycle.health(unit);
  }

  async wake(org: OrgRecord, unit: UnitRecord): Promise<UnitLease> {
    const before = this.lifecycle.statusOf(unit.id);
    const booted = before === "cold";
    // A unit that runs costs no timing; a boot or a resume is observed.
    const release =
      before === "running" ? await this.hold(org, unit) : await timed(booted ? "boot" : "wake", this.hold(org, unit));
    return new LocalLease(this, org, unit, booted, release);
  }

  /**
   * Wakes the unit and holds it (lease.ts); lifecycle failures become the node's errors. A unit
   * created with `wait_for_capacity` waits up to CAPACITY_WAIT_MS for a running slot (another
   * unit going idle) where others fail at once with `RunningLimitError`.
   */
  async hold(org: OrgRecord, unit: UnitRecord): Promise<() => void> {
    const deadline = Date.now() + (unit.waitForCapacity ? CAPACITY_WAIT_MS : 0);
    for (;;) {
      try {
        return await this.lifecycle.acquire(org, unit);
      } catch (err) {
        if (err instanceof UnitDeletedError || err instanceof UnitMovingError) throw err;
        if (!(err instanceof RunningLimitError)) throw new UnitStartError(unit.name, err);
        const left = deadline - Date.now();
        if (left <= 0) throw err;
        // A release frees a slot at once; a unit deleted or stopped is seen by the next try.
        await this.lifecycle.activity.nextIdle(Math.min(left, CAPACITY_RETRY_MS));
      }
    }
  }

  agentEndpoint(unit: UnitRecord): AgentEndpoint {
    return agentEndpoint(this.runtime, this.lifecycle, unit);
  }

  checkpoint(unit: UnitRecord, comment: string, progress: Progress): Promise<CheckpointResult> {
    return timed("checkpoint", this.lifecycle.checkpoints.checkpoint(unit, comment, progress));
  }

  restore(
    org: OrgRecord,
    unit: UnitRecord,
    checkpoint: CheckpointRecord,
    progress: Progress,
  ): Promise<CheckpointRecord> {
    return timed("restore", this.lifecycle.checkpoints.restore(org, unit, checkpoint, progress));
  }

  async upgrade(org: OrgRecord, unit: UnitRecord, to: ImageRecord, progress: Progress): Promise<CheckpointRecord> {
    const backup = await this.lifecycle.checkpoints.upgrade(org, unit, to, progress);
    await this.lifecycle.images.pruneQuietly();
    return backup;
  }

  deleteCheckpoint(unit: UnitRecord, checkpoint: CheckpointRecord): Promise<void> {
    return this.lifecycle.checkpoints.delete(unit, checkpoint);
  }

  /** On this node, or (with an object store) restorable from it: `replicated` names those stored. */
  async checkpointsPresent(
    unitId: string,
    ids: readonly string[],
    replicated: ReadonlySet<string> = new Set(),
  ): Promise<ReadonlySet<string>> {
    return new Set(
      ids.filter((id) => this.runtime.hasCheckpoint(unitId, id) || (this.replicator && replicated.has(id))),
    );
  }

  async moveOut(unit: UnitRecord, progress: Progress): Promise<CheckpointRecord> {
    const replicator = this.replicator;
    if (!replicator) {
      throw new UnitUnavailableError("units move through the object store: start the nodes with --object-store");
    }
    await this.lifecycle.beginMove(unit);
    try {
      progress(`unit '${unit.name}' is stopped; saving its files`);
      const { checkpoint } = await this.lifecycle.checkpoints.checkpoint(unit, "moving to another node", progress);
      progress("copying the unit's checkpoints to the object store");
      for (let attempt = 0; ; attempt++) {
        await replicator.idle();
        const left = (await this.store.checkpoints.list(unit.id)).filter((c) => c.replica?.state !== "replicated");
        if (left.length === 0) break;
        if (attempt >= 1) {
          throw new UnitUnavailableError(
            `the object store does not hold checkpoint${left.length === 1 ? "" : "s"} ${left.map((c) => c.id).join(", ")} of unit '${unit.name}' (the copy failed): nothing moved; try again`,
          );
        }
        for (const c of left) replicator.enqueue(unit.id, c.id);
      }
      return checkpoint;
    } catch (err) {
      this.lifecycle.endMove(unit.id);
      throw err;
    }
  }

  moveDone(unit: UnitRecord): Promise<void> {
    return this.lifecycle.moved(unit);
  }

  async moveAborted(unit: UnitRecord): Promise<void> {
    this.lifecycle.endMove(unit.id);
  }

  async moveIn(unit: UnitRecord, checkpoint: CheckpointRecord, progress: Progress): Promise<void> {
    if (!this.replicator) {
      throw new UnitUnavailableError("units move through the object store: start the nodes with --object-store");
    }
    // What an earlier move of the unit here left goes first.
    await this.runtime.destroy(unit.id);
    await this.runtime.forget(unit.id);
    if (!(await this.replicator.fetch(unit.id, checkpoint, progress))) {
      throw new UnitUnavailableError(`checkpoint ${checkpoint.id} of unit '${unit.name}' is not in the object store`);
    }
    await this.runtime.forkDisk(unit.id, checkpoint.id, unit.id);
    progress(`unit '${unit.name}' has its files on this node`);
  }

  async resourceLimits(): Promise<ResourceLimits> {
    return this.runtime.resourceLimits();
  }

  async applyResources(unitId: string, resources: ResourcesPolicy): Promise<boolean> {
    // A cold unit gets its policy at its next boot.
    if (this.lifecycle.statusOf(unitId) === "cold") return false;
    return this.runtime.applyResources(unitId, resources);
  }

  applyNetworkPolicy(unitId: string, policyJson: string): Promise<void> {
    return this.egress.apply(unitId, policyJson);
  }

  networkReport(unitId: string, limit: number): Promise<NetworkLog> {
    return this.egress.report(unitId, limit);
  }
}
