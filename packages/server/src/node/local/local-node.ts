import { mkdir } from "node:fs/promises";
import type { Socket } from "node:net";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type { ImageRecipe, NetworkLog } from "@ums/protocol";
import type { Logger } from "pino";
import type { AgentEndpoint } from "../../agent/deadline.js";
import { WaitAbandonedError } from "../../lifecycle/capacity.js";
import { RunningLimitError, UnitDeletedError, UnitMovingError } from "../../lifecycle/errors.js";
import type { Lifecycle } from "../../lifecycle/lifecycle.js";
import { type LifecycleOp, metrics } from "../../metrics/server-metrics.js";
import type { NetworkEgress } from "../../network/egress.js";
import type { Child } from "../../replication/children.js";
import { receiveSnapshot, sendSnapshot } from "../../replication/direct.js";
import { assertId } from "../../replication/keys.js";
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
import type { PeerNodes } from "../remote/peers.js";
import type { CheckpointResult, Progress, UnitHealth, UnitLease, UnitNode, WakeOpts } from "../unit-node.js";
import { agentEndpoint } from "./agent-endpoint.js";
import type { HttpTargets } from "./http-targets.js";
import type { HostSockets } from "./internal-api/host-sockets.js";
import { LocalLease } from "./lease.js";
import type { Replicator } from "./replicator.js";

/**
 * What a node keeps of a unit whose record names another node (`local`: its checkpoints with a
 * snapshot here, oldest first): the newest (the parent a move back is sent against) and those the
 * store does not hold yet (this node may be the only one with them).
 */
function kept(local: readonly CheckpointRecord[]): CheckpointRecord[] {
  return local.filter((c, i) => i === local.length - 1 || c.replica?.state !== "replicated");
}

/**
 * A move whose API process went away before it said how the move ended (moveDone or moveAborted):
 * once this long has passed with no send of the unit under way, the node settles it by the unit's
 * record (another node's: done; still this one's: aborted).
 */
const MOVE_EXPIRE_MS = 15 * 60_000;

/** How often a node looks for the snapshots kept of units that moved away and are gone now. */
const RETIRED_SWEEP_MS = 10 * 60_000;
/**
 * How long a wake of a unit created with `wait_for_capacity` waits for a running slot
 * (docs/ARCHITECTURE.md section 5); then it answers 409 saying how long it waited.
 */
export const CAPACITY_WAIT_MS = 60_000;
/**
 * The first waiter looks again at least this often: slots free at once on this node's releases,
 * stops and deletes, but not when units stop on other nodes or the limit is raised.
 */
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
  private readonly peers: PeerNodes | undefined;
  private closing: Promise<void> | undefined;
  private retiredTimer: NodeJS.Timeout | undefined;
  /** Moves out under way, by unit id (their expiry, MOVE_EXPIRE_MS). */
  private readonly movesOut = new Map<string, NodeJS.Timeout>();
  /** Sends of a unit's checkpoints to another node under way, by unit id. */
  private readonly sending = new Map<string, number>();
  private retired: { nodeId: string; log: Logger } | undefined;

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
    /** Issue #15: the other nodes' endpoints (a unit moving here comes straight from its node). */
    peers?: PeerNodes;
  }) {
    this.store = parts.store;
    this.runtime = parts.runtime;
    this.lifecycle = parts.lifecycle;
    this.egress = parts.egress;
    this.httpTargets = parts.httpTargets;
    this.hostSockets = parts.hostSockets;
    this.serviceEvents = parts.serviceEvents;
    this.replicator = parts.replicator;
    this.peers = parts.peers;
  }

  /**
   * Issue #15: the snapshots kept of units that moved to another node (moveDone) go once the unit,
   * or its checkpoints, are gone, and once the store holds them but the newest; a unit whose record
   * names this node again is this node's. Now, then every `everyMs` until close; a sweep that fails
   * is logged and done again next time.
   */
  startRetiredSweep(nodeId: string, log: Logger, everyMs = RETIRED_SWEEP_MS): Promise<void> {
    this.retired = { nodeId, log };
    // sweepRetired logs its own failures; the catch is for a logger that throws.
    this.retiredTimer ??= setInterval(() => this.sweepRetired().catch(() => {}), everyMs);
    this.retiredTimer.unref();
    return this.sweepRetired();
  }

  /** One sweep (startRetiredSweep); never throws. */
  async sweepRetired(): Promise<void> {
    const r = this.retired;
    if (!r) return;
    try {
      await this.retireRehomed(r.nodeId, r.log);
      for (const id of await this.runtime.retired()) {
        // One unit's failure is logged; the others are swept all the same.
        await this.lifecycle
          .withUnitLock(id, () => this.sweepRetiredUnit(id, r.nodeId, r.log))
          .catch((err: unknown) => r.log.warn({ err, unitId: id }, "sweeping what is kept of a unit failed"));
      }
    } catch (err) {
      r.log.warn({ err }, "sweeping the snapshots kept of units that moved away failed");
    }
  }

  /**
   * Issue #15: units made again on other nodes while this one was down (`ums node drain
   * --from-store`): what this node still has of them is retired, never booted here again (the sweep
   * then keeps only the newest snapshot and those the store does not hold yet, which it copies).
   */
  private async retireRehomed(nodeId: string, log: Logger): Promise<void> {
    for (const id of await this.store.nodes.leftUnits(nodeId)) {
      const unit = await this.store.units.getById(id);
      if (unit?.nodeId !== nodeId) {
        if (this.lifecycle.statusOf(id) !== "cold") {
          // It runs here (this node was not down but stopped answering): the next sweep, once it is cold.
          log.warn({ unitId: id }, "a unit made again on another node still runs here");
          continue;
        }
        if (unit) {
          const local = await this.localCheckpoints(id);
          await (
            await this.lifecycle.moved(
              unit,
              local.map((c) => c.id),
            )
          ).removed;
        } else {
          await this.runtime.markRetired(id);
        }
        log.info({ unitId: id }, "retired what this node held of a unit made again on another node while it was down");
      }
      await this.store.nodes.forgetLeftUnit(nodeId, id);
    }
  }

  private async sweepRetiredUnit(id: string, nodeId: string, log: Logger): Promise<void> {
    // Listed before its lock was taken: a move back may have made it this node's meanwhile (its
    // files received, its record not yet changed): it is no longer retired, and is left alone.
    if (!(await this.runtime.isRetired(id))) return;
    const unit = await this.store.units.getById(id);
    if (unit?.nodeId === nodeId) {
      // Moved back, and a crash came before its move in made it this node's again.
      if (this.lifecycle.statusOf(id) === "cold") await this.runtime.unretire(id);
      return;
    }
    const local = unit ? await this.localCheckpoints(id) : [];
    // A copy of its checkpoints under way reads snapshots that may go now: it waits.
    const resume = await this.replicator?.pauseUnit(id);
    try {
      if (local.length === 0) {
        await this.runtime.destroy(id);
        await this.runtime.forget(id);
        log.info({ unitId: id }, "removed what was kept of a unit that moved away (it, or its checkpoints, are gone)");
        return;
      }
      // The newest stays (the parent of a move back); the others until the store holds them.
      const keep = kept(local);
      await this.runtime.retire(
        id,
        keep.map((c) => c.id),
      );
    } finally {
      resume?.();
    }
    const keep = kept(local);
    for (const c of keep) if (c.replica?.state !== "replicated") this.replicator?.enqueue(id, c.id);
  }

  /** Stops the idle sweep and closes what the node serves; units keep running (a restart re-adopts them). */
  close(): Promise<void> {
    if (this.retiredTimer) clearInterval(this.retiredTimer);
    for (const t of this.movesOut.values()) clearTimeout(t);
    this.movesOut.clear();
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
    // A copy of its checkpoints under way reads snapshots the delete removes: it stops first.
    const resume = await this.replicator?.pauseUnit(unit.id);
    let dropped: boolean;
    try {
      dropped = await this.lifecycle.destroy(unit, () => this.store.units.delete(unit.orgId, unit.name));
    } finally {
      resume?.();
    }
    if (unit.imageId !== null) await this.lifecycle.images.pruneQuietly();
    await this.replicator?.unitDeleted(unit.id);
    return dropped;
  }

  health(unit: UnitRecord): Promise<UnitHealth> {
    return this.lifecycle.health(unit);
  }

  async wake(org: OrgRecord, unit: UnitRecord, opts: WakeOpts = {}): Promise<UnitLease> {
    const before = this.lifecycle.statusOf(unit.id);
    const booted = before === "cold";
    // A unit that runs costs no timing; a boot or a resume is observed.
    const release =
      before === "running"
        ? await this.hold(org, unit, opts.signal)
        : await timed(booted ? "boot" : "wake", this.hold(org, unit, opts.signal));
    return new LocalLease(this, org, unit, booted, release);
  }

  /**
   * Wakes the unit and holds it (lease.ts); lifecycle failures become the node's errors. At the
   * organization's running limit a unit created with `wait_for_capacity` queues (issue #16: first
   * come, first served, lifecycle/capacity.ts) for up to CAPACITY_WAIT_MS, and leaves the queue
   * when `signal` aborts (its client went away); others fail at once with `RunningLimitError`.
   */
  async hold(org: OrgRecord, unit: UnitRecord, signal?: AbortSignal): Promise<() => void> {
    const queue = this.lifecycle.capacity;
    const place = queue.arrive(org.id, unit.id);
    const since = Date.now();
    try {
      for (;;) {
        try {
          return await this.lifecycle.acquire(org, unit, place);
        } catch (err) {
          if (err instanceof UnitDeletedError || err instanceof UnitMovingError) throw err;
          if (!(err instanceof RunningLimitError)) throw new UnitStartError(unit.name, err);
          if (!unit.waitForCapacity) throw err;
          const left = since + CAPACITY_WAIT_MS - Date.now();
          const waited = `${((Date.now() - since) / 1000).toFixed(1)} s`;
          if (left <= 0)
            throw new RunningLimitError(`${err.message} (waited ${waited} for a running slot, the most a wake waits)`);
          queue.join(place);
          // The first waiter looks again now and then; the others when they are first.
          const ms = queue.isFirst(place) ? Math.min(left, CAPACITY_RETRY_MS) : left;
          await queue.turn(place, ms, signal).catch((why: unknown) => {
            throw why instanceof WaitAbandonedError
              ? new RunningLimitError(`${err.message} (the caller went away after waiting ${waited})`)
              : why;
          });
        }
      }
    } finally {
      queue.leave(place);
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
    // The unit's copies to the store wait while its files go to the other node (the same disk and
    // CPU); this node makes them once the move is done (moveDone) or failed (moveAborted).
    replicator.hold(unit.id);
    try {
      progress(`unit '${unit.name}' is stopped; saving its files`);
      const { checkpoint } = await this.lifecycle.checkpoints.checkpoint(unit, "moving to another node", progress);
      this.armMoveExpiry(unit);
      return checkpoint;
    } catch (err) {
      replicator.release(unit.id);
      this.lifecycle.endMove(unit.id);
      throw err;
    }
  }

  /**
   * The move is done and the unit's record names another node: nothing of the unit stays here but
   * its newest snapshot (the parent of a move back) and those the store does not hold yet, which
   * this node goes on copying (retireDisk). On the node it was moving to, when the move failed:
   * what it received goes (it keeps only the newest snapshot the store holds, if it had one).
   */
  /** See MOVE_EXPIRE_MS. */
  private armMoveExpiry(unit: UnitRecord): void {
    clearTimeout(this.movesOut.get(unit.id));
    const timer = setTimeout(() => {
      this.expireMove(unit).catch((err: unknown) =>
        this.retired?.log.warn({ err, unitId: unit.id }, "settling a move its API process left failed"),
      );
    }, MOVE_EXPIRE_MS);
    timer.unref();
    this.movesOut.set(unit.id, timer);
  }

  private async expireMove(unit: UnitRecord): Promise<void> {
    if (!this.movesOut.has(unit.id)) return;
    if ((this.sending.get(unit.id) ?? 0) > 0) return this.armMoveExpiry(unit);
    const row = await this.store.units.getById(unit.id);
    const mine = this.retired?.nodeId;
    this.retired?.log.warn({ unitId: unit.id }, "a move its API process left is settled by the unit's record");
    if (row && mine !== undefined && row.nodeId !== mine) await this.moveDone(row);
    else await this.moveAborted(unit);
  }

  async moveDone(unit: UnitRecord): Promise<void> {
    clearTimeout(this.movesOut.get(unit.id));
    this.movesOut.delete(unit.id);
    const leaving = this.lifecycle.isMoving(unit.id);
    // A copy under way reads snapshots that go now; it resumes once they went (those it needs stay).
    const resume = await this.replicator?.pauseUnit(unit.id);
    let removed: Promise<void>;
    try {
      const local = await this.localCheckpoints(unit.id);
      // On the old node, and on the target when the move failed, alike: what a move back would be
      // sent against, and whatever the store does not hold yet (nothing else may have it).
      const keep = kept(local);
      ({ removed } = await this.lifecycle.moved(
        unit,
        keep.map((c) => c.id),
      ));
    } catch (err) {
      resume?.();
      throw err;
    }
    // Its files go after the answer (a move is done once its record names the other node); what a
    // failure leaves, the retired sweep removes. Then its copies to the store go on.
    removed
      .finally(() => {
        resume?.();
        if (leaving) this.replicator?.release(unit.id);
      })
      .catch((err: unknown) =>
        this.retired?.log.warn({ err, unitId: unit.id }, "removing the files of a unit that moved away failed"),
      );
  }

  async moveAborted(unit: UnitRecord): Promise<void> {
    clearTimeout(this.movesOut.get(unit.id));
    this.movesOut.delete(unit.id);
    // Only a move that is under way here holds the unit's copies (moveOut).
    if (this.lifecycle.isMoving(unit.id)) this.replicator?.release(unit.id);
    this.lifecycle.endMove(unit.id);
  }

  /** The unit's checkpoints whose snapshot is on this node, oldest first. */
  private async localCheckpoints(unitId: string): Promise<CheckpointRecord[]> {
    return (await this.store.checkpoints.list(unitId)).filter((c) => this.runtime.hasCheckpoint(unitId, c.id));
  }

  /**
   * Checkpoint `checkpointId` of a unit moving off this node, for the node it moves to (`have`:
   * the unit's checkpoints that node holds): a `btrfs send` incremental against the newest of
   * them this node holds too, else whole.
   */
  async sendCheckpoint(
    unitId: string,
    checkpointId: string,
    have: readonly string[],
    /** Where the stream goes (relayPair's peer); by default a pipe, the child's stdout. */
    stdout?: Socket,
  ): Promise<{ parent: string | null; child: Child }> {
    assertId(unitId, "unit id");
    assertId(checkpointId, "checkpoint id");
    if (!this.runtime.hasCheckpoint(unitId, checkpointId)) {
      throw new UnitUnavailableError(`checkpoint ${checkpointId} of unit ${unitId} is not on this node`);
    }
    const wanted = new Set(have);
    const cps = await this.store.checkpoints.list(unitId);
    const parent = cps
      .filter((c) => c.id !== checkpointId && wanted.has(c.id) && this.runtime.hasCheckpoint(unitId, c.id))
      .at(-1);
    const dir = this.runtime.checkpointDir(unitId);
    const child = sendSnapshot(join(dir, checkpointId), parent && join(dir, parent.id), stdout);
    this.sending.set(unitId, (this.sending.get(unitId) ?? 0) + 1);
    child.exit
      .then(() => {
        const n = (this.sending.get(unitId) ?? 1) - 1;
        if (n > 0) this.sending.set(unitId, n);
        else this.sending.delete(unitId);
      })
      .catch(() => {});
    return { parent: parent?.id ?? null, child };
  }

  async moveIn(unit: UnitRecord, checkpoint: CheckpointRecord, progress: Progress, from?: string): Promise<void> {
    if (!this.replicator) {
      throw new UnitUnavailableError("units move through the object store: start the nodes with --object-store");
    }
    await this.lifecycle.withUnitLock(unit.id, () => this.receiveUnit(unit, checkpoint, progress, from));
    progress(`unit '${unit.name}' has its files on this node`);
  }

  private async receiveUnit(
    unit: UnitRecord,
    checkpoint: CheckpointRecord,
    progress: Progress,
    from: string | undefined,
  ): Promise<void> {
    const replicator = this.replicator as Replicator;
    // What an earlier stay of the unit here left goes first, but the snapshots kept (moveDone): the
    // newest is the parent to receive against; those not in the store yet are still being copied.
    const local = await this.localCheckpoints(unit.id);
    const kept = local.at(-1);
    if (kept) {
      await this.runtime.retire(
        unit.id,
        local.map((c) => c.id),
      );
      await this.runtime.unretire(unit.id);
    } else {
      await this.runtime.destroy(unit.id);
      await this.runtime.forget(unit.id);
    }
    if (!this.runtime.hasCheckpoint(unit.id, checkpoint.id)) {
      if (from && this.peers) {
        // A move's own checkpoint is in no store yet (its node copies it once the move is done):
        // when its node cannot send it, the move fails and the unit stays there.
        try {
          await this.receiveFrom(from, unit, checkpoint, kept?.id, progress);
        } catch (err) {
          throw new UnitUnavailableError(
            `checkpoint ${checkpoint.id} of unit '${unit.name}' could not be received from its node (${err instanceof Error ? err.message : String(err)}): nothing moved; try again`,
          );
        }
      } else if (!(await replicator.fetch(unit.id, checkpoint, progress))) {
        throw new UnitUnavailableError(`checkpoint ${checkpoint.id} of unit '${unit.name}' is not in the object store`);
      }
    }
    await this.runtime.forkDisk(unit.id, checkpoint.id, unit.id);
  }

  /** Receives the checkpoint straight from node `from` (node-endpoint.ts `send`), incremental against `kept` if it can. */
  private async receiveFrom(
    from: string,
    unit: UnitRecord,
    checkpoint: CheckpointRecord,
    kept: string | undefined,
    progress: Progress,
  ): Promise<void> {
    const peers = this.peers as PeerNodes;
    const started = performance.now();
    const { parent, body } = await peers.send(from, unit.id, checkpoint.id, kept ? [kept] : []);
    if (parent !== null && parent !== kept) {
      body.destroy();
      throw new UnitUnavailableError(`the node sent checkpoint ${checkpoint.id} against ${parent}, which is not here`);
    }
    progress(
      parent
        ? `receiving checkpoint ${checkpoint.id} from its node (only what changed since ${parent})`
        : `receiving checkpoint ${checkpoint.id} from its node (whole: no earlier one is on this node)`,
    );
    const dir = this.runtime.checkpointDir(unit.id);
    await mkdir(dir, { recursive: true });
    const bytes = await receiveSnapshot({
      destDir: dir,
      checkpointId: checkpoint.id,
      incremental: parent !== null,
      body,
      receiving: (id) => this.runtime.receiving(unit.id, id),
    });
    await this.runtime.checkpointsChanged(unit.id);
    progress(
      `received checkpoint ${checkpoint.id} (${(bytes / 1048576).toFixed(1)} MiB) in ${Math.round(performance.now() - started)} ms`,
    );
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
