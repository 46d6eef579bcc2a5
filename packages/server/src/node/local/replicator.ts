import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import {
  assertId,
  checkpointKeys,
  deleteExport,
  discardExport,
  exportCheckpoint,
  importCheckpoint,
  isReceived,
  isReplicationError,
  type ObjectStore,
} from "../../replication/index.js";
import type { UnitRuntime } from "../../runtime/runtime.js";
import type { CheckpointRecord, UnitRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { UnitUnavailableError } from "../errors.js";
import { nodeIsUp } from "../registry/liveness.js";
import { evictable, exportParent } from "./retention.js";

/** Issue #15: how often a node looks for checkpoints of its units whose copier was lost (Replicator.adopt). */
const ADOPT_EVERY_MS = 5 * 60_000;

/**
 * The store seen from one unit: its keys under `units/<unitId>/` (checkpoint ids, `v0`, `v1`, …,
 * are the unit's own, not unique across units).
 */
export function unitObjects(objects: ObjectStore, unitId: string): ObjectStore {
  const p = `units/${assertId(unitId, "unit id")}/`;
  return {
    description: `${objects.description} ${p}`,
    putObject: (key, body, opts) => objects.putObject(p + key, body, opts),
    getObject: (key, opts): Promise<Readable> => objects.getObject(p + key, opts),
    headObject: async (key, opts) => {
      const o = await objects.headObject(p + key, opts);
      return o && { ...o, key: o.key.slice(p.length) };
    },
    list: async (prefix, opts) =>
      (await objects.list(p + prefix, opts)).map((o) => ({ ...o, key: o.key.slice(p.length) })),
    deleteObject: (key, opts) => objects.deleteObject(p + key, opts),
    createMultipartUpload: (key, opts) => objects.createMultipartUpload(p + key, opts),
    uploadPart: (key, uploadId, n, body, opts) => objects.uploadPart(p + key, uploadId, n, body, opts),
    completeMultipartUpload: (key, uploadId, parts, opts) =>
      objects.completeMultipartUpload(p + key, uploadId, parts, opts),
    abortMultipartUpload: (key, uploadId, opts) => objects.abortMultipartUpload(p + key, uploadId, opts),
  };
}

export interface ReplicatorDeps {
  readonly store: Store;
  readonly objects: ObjectStore;
  readonly runtime: Pick<UnitRuntime, "checkpointDir" | "hasCheckpoint" | "checkpointsChanged" | "receiving">;
  /** Host-private: the state of unfinished uploads, per unit. */
  readonly stateDir: string;
  readonly log: Logger;
  /** Issue #15: this node's id: it resumes the copies of its own units' checkpoints only. */
  readonly nodeId?: string;
  /**
   * Issue #15 retention (`--local-checkpoints`, docs/SCALE-OUT.md): once a unit's checkpoint is
   * stored, the local snapshots of its checkpoints that node/local/retention.ts allows go, through
   * `evict` (CheckpointWork.evictLocal: under the unit's lock). Absent: every snapshot stays.
   */
  readonly retention?: {
    readonly keep: number;
    readonly evict: (
      unitId: string,
      choose: (unit: UnitRecord, rows: CheckpointRecord[]) => readonly string[],
    ) => Promise<readonly string[]>;
  };
}

/** An object store that holds connections (the S3 client's): closed with the replicator. */
interface Closable {
  destroy?(): void;
}

interface Job {
  readonly unitId: string;
  readonly cpId: string;
}

/**
 * Issue #15 part 4: copies each checkpoint to the object store after it is taken, one at a time in
 * the background (checkpoint latency is unchanged), as a `btrfs send` stream incremental against
 * the newest of the unit's earlier checkpoints that is stored and still on this node. The row's
 * `replica` says where it stands; a failure is recorded, logged and taken up again at the next
 * start, as is an export a stop cut (it resumes, sending only the parts not stored yet).
 */
export class Replicator {
  private readonly queue: Job[] = [];
  /** Units whose copies wait: a unit moving off this node (its files go to the other node meanwhile). */
  private readonly holds = new Map<string, number>();
  private draining: Promise<void> | undefined;
  private current: (Job & { abort: AbortController; done: Promise<boolean> }) | undefined;
  private closed = false;
  /** Per unit, the fetch under way: one import at a time into a unit's checkpoint directory. */
  private readonly fetching = new Map<string, Promise<void>>();
  /** Retention: the units whose snapshots are to be looked at, one pass at a time. */
  private readonly toRetain = new Set<string>();
  private retaining: Promise<void> | undefined;
  private adoptTimer: NodeJS.Timeout | undefined;
  /** Per unit, snapshots being evicted now: no export of the unit starts until they are gone. */
  private readonly evicting = new Map<string, Promise<void>>();

  constructor(private readonly deps: ReplicatorDeps) {}

  /**
   * Makes sure checkpoint `cp`'s snapshot is on this node before a restore or a fork: when it is
   * missing and the store holds it, its chain is received from the store (the checkpoints of the
   * chain that are missing too come back with it). False when it is missing and the store has no
   * copy of it (the caller fails as without a store). A checkpoint deleted while it is fetched
   * leaves a snapshot without a row, which the next start removes.
   */
  async fetch(unitId: string, cp: CheckpointRecord, progress: (message: string) => void): Promise<boolean> {
    const { runtime } = this.deps;
    if (runtime.hasCheckpoint(unitId, cp.id)) return true;
    if (cp.replica?.state !== "replicated") return false;
    const prev = this.fetching.get(unitId) ?? Promise.resolve();
    const run = prev.then(async () => {
      if (runtime.hasCheckpoint(unitId, cp.id)) return;
      progress(`checkpoint ${cp.id} is not on this node: receiving it from the object store`);
      const started = performance.now();
      // A unit of another node (a fork of it here, or one moving here) has no directory on this one
      // yet: made as the runtime makes a unit's (its container reaches its rootfs through it).
      await mkdir(runtime.checkpointDir(unitId), { recursive: true });
      const r = await importCheckpoint({
        store: unitObjects(this.deps.objects, unitId),
        checkpointId: cp.id,
        destDir: runtime.checkpointDir(unitId),
        isPresent: async (id) => runtime.hasCheckpoint(unitId, id),
        receiving: (id) => runtime.receiving(unitId, id),
      });
      await runtime.checkpointsChanged(unitId);
      this.deps.log.info(
        { unitId, checkpoint: cp.id, received: r.received, ms: Math.round(performance.now() - started) },
        "received a checkpoint from the object store",
      );
      progress(`received ${r.received.join(", ")} from the object store`);
      // What came back and is not needed here goes again (after the restore or fork, under its lock).
      this.retain(unitId);
    });
    // The next fetch of the unit waits for this one, whatever its outcome (its own caller has it).
    const settled = run.catch(() => {});
    this.fetching.set(unitId, settled);
    try {
      await run;
    } catch (err) {
      // The caller's answer names the kind of failure; the store's address and answer are logged only.
      this.deps.log.warn(
        { unitId, checkpoint: cp.id, err: err instanceof Error ? err.message : String(err) },
        "receiving a checkpoint from the object store failed",
      );
      const kind = isReplicationError(err) ? err.code : "INTERNAL";
      throw new UnitUnavailableError(
        `checkpoint ${cp.id} is not on this node, and receiving it from the object store failed (${kind}); nothing was changed: try again`,
      );
    } finally {
      if (this.fetching.get(unitId) === settled) this.fetching.delete(unitId);
    }
    return true;
  }

  /** A checkpoint was taken: its row says pending, and its export is queued. Never throws (logs). */
  async taken(unitId: string, cpId: string): Promise<void> {
    try {
      await this.deps.store.checkpoints.setReplica(unitId, cpId, {
        state: "pending",
        at: new Date().toISOString(),
        ...this.byMe(),
      });
      this.enqueue(unitId, cpId);
    } catch (err) {
      this.deps.log.error({ err, unitId, checkpoint: cpId }, "queueing a checkpoint's copy to the object store failed");
    }
  }

  /** Queues the checkpoint's export (once). */
  enqueue(unitId: string, cpId: string): void {
    if (this.closed || this.queue.some((j) => j.unitId === unitId && j.cpId === cpId)) return;
    this.queue.push({ unitId, cpId });
    this.kick();
  }

  private kick(): void {
    if (this.closed || !this.queue.some((j) => !this.isHeld(j.unitId))) return;
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
      // A job queued after the drain's last look starts its own.
      this.kick();
    });
  }

  /** The first queued job of a unit not held, taken off the queue. */
  private next(): Job | undefined {
    const i = this.queue.findIndex((j) => !this.isHeld(j.unitId));
    return i < 0 ? undefined : this.queue.splice(i, 1)[0];
  }

  /** At start: queues every checkpoint of this node's units whose export is pending or failed. */
  async resume(): Promise<number> {
    const left = await this.deps.store.checkpoints.unreplicated(this.deps.nodeId);
    for (const cp of left) {
      // Shown as pending again while it is retried.
      if (cp.replica?.state === "failed")
        await this.deps.store.checkpoints.setReplica(cp.unitId, cp.id, {
          state: "pending",
          at: new Date().toISOString(),
          ...(cp.replica.by && { by: cp.replica.by }),
        });
      this.enqueue(cp.unitId, cp.id);
    }
    // Retention set (or lowered) since the last start applies now to every unit of the node.
    if (this.deps.retention) {
      for (const u of await this.deps.store.units.withStatus(["cold", "warm", "running"], this.deps.nodeId)) {
        this.retain(u.id);
      }
    }
    return left.length;
  }

  /** The unit's queued copies wait until each `hold` has its `release` (a move done or failed, a delete done). */
  hold(unitId: string): void {
    this.holds.set(unitId, (this.holds.get(unitId) ?? 0) + 1);
  }

  release(unitId: string): void {
    const n = (this.holds.get(unitId) ?? 0) - 1;
    if (n > 0) this.holds.set(unitId, n);
    else this.holds.delete(unitId);
    this.kick();
  }

  private isHeld(unitId: string): boolean {
    return this.holds.has(unitId);
  }

  /** Resolves once nothing is queued but held copies, and nothing runs (tests, and a stop that waits). */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    for (let job = this.next(); job && !this.closed; job = this.next()) {
      // Snapshots of the unit being evicted (one may be this export's parent): after they are gone,
      // parentOf picks among those left. From here to `current` nothing yields: an eviction that
      // begins meanwhile sees this export under way.
      for (let e = this.evicting.get(job.unitId); e; e = this.evicting.get(job.unitId)) await e;
      if (this.closed) break;
      const abort = new AbortController();
      const done = this.exportOne(job, abort.signal).catch((err: unknown) => {
        // exportOne records its failures; this is the store (the database) failing under it.
        this.deps.log.error({ err, unitId: job.unitId, checkpoint: job.cpId }, "checkpoint export failed");
        return false;
      });
      this.current = { ...job, abort, done };
      const stored = await done;
      this.current = undefined;
      // Once it is no longer under way: the pass may then evict what this copy made redundant.
      if (stored) this.retain(job.unitId);
    }
  }

  /** True when the checkpoint is stored now (and was not deleted meanwhile). */
  private async exportOne(job: Job, signal: AbortSignal): Promise<boolean> {
    const { store, runtime, log } = this.deps;
    const cp = await store.checkpoints.get(job.unitId, job.cpId);
    if (!cp || cp.replica?.state === "replicated") return false;
    const at = () => new Date().toISOString();
    if (!runtime.hasCheckpoint(job.unitId, job.cpId)) {
      await store.checkpoints.setReplica(job.unitId, job.cpId, {
        state: "failed",
        error: "its snapshot is not on this node",
        at: at(),
      });
      return false;
    }
    const dir = runtime.checkpointDir(job.unitId);
    // Received here (a unit that moved here from the node it was taken on): that node copies it,
    // unless it went down (or away) before it stored it: then this node adopts the copy.
    const by = cp.replica?.by;
    if (by !== undefined && by !== this.deps.nodeId) {
      if (!(await this.isDown(by))) return false;
      log.info(
        { unitId: job.unitId, checkpoint: job.cpId, node: by },
        "copying a checkpoint whose node is down before it stored it",
      );
      await store.checkpoints.setReplica(job.unitId, job.cpId, { state: "pending", at: at(), ...this.byMe() });
    } else if (by === undefined && (await isReceived(join(dir, job.cpId)))) return false;
    const parent = await this.parentOf(cp);
    const started = performance.now();
    try {
      const r = await exportCheckpoint({
        store: unitObjects(this.deps.objects, job.unitId),
        unitId: job.unitId,
        checkpointId: job.cpId,
        snapshotPath: join(dir, job.cpId),
        ...(parent && { parent: { checkpointId: parent, snapshotPath: join(dir, parent) } }),
        stateDir: this.unitStateDir(job.unitId),
        signal,
      });
      const stored = await store.checkpoints.setReplica(job.unitId, job.cpId, {
        ...this.byMe(),
        state: "replicated",
        bytes: r.manifest.compressedBytes,
        parent: r.manifest.parentCheckpointId,
        chain: r.manifest.chain,
        at: at(),
      });
      log.info(
        {
          unitId: job.unitId,
          checkpoint: job.cpId,
          parent,
          bytes: r.manifest.compressedBytes,
          uploaded: r.uploadedBytes,
          ms: Math.round(performance.now() - started),
        },
        "checkpoint copied to the object store",
      );
      // Deleted while it was copied: its copy goes too.
      if (!stored) await this.collect(job.unitId);
      return stored;
    } catch (err) {
      if (this.closed && isReplicationError(err, "ABORTED")) return false; // resumed at the next start
      if (isReplicationError(err, "ABORTED")) return false; // forgotten: its row or unit went
      const message = err instanceof Error ? err.message : String(err);
      log.warn(
        { unitId: job.unitId, checkpoint: job.cpId, err: message },
        "copying a checkpoint to the object store failed",
      );
      // The row (shown to users, and to the unit itself) says what kind of failure, never the
      // store's address or answer: those are in the server log.
      const kind = isReplicationError(err) ? err.code : "INTERNAL";
      await store.checkpoints.setReplica(job.unitId, job.cpId, {
        state: "failed",
        error: `the copy failed (${kind}); the server log says why; it is tried again at the server's next start`,
        at: at(),
        ...this.byMe(),
      });
      return false;
    }
  }

  private byMe(): { by?: string } {
    return this.deps.nodeId !== undefined ? { by: this.deps.nodeId } : {};
  }

  /** Whether node `id` is down (its heartbeat is old) or gone: its copies are no longer its to make. */
  private async isDown(id: string): Promise<boolean> {
    const node = await this.deps.store.nodes.get(id);
    return !node || !nodeIsUp(node);
  }

  /**
   * Issue #15: queues the copies of this node's units' checkpoints that another node was to make
   * and cannot any more (it is down or gone): a unit moved here, and its old node was lost before
   * it stored the move's checkpoint. At start (resume) and every ADOPT_EVERY_MS (startAdopting).
   */
  async adopt(): Promise<number> {
    const nodeId = this.deps.nodeId;
    if (nodeId === undefined) return 0;
    let n = 0;
    for (const cp of await this.deps.store.checkpoints.unreplicated(nodeId)) {
      const by = cp.replica?.by;
      if (by === undefined || by === nodeId || !(await this.isDown(by))) continue;
      this.enqueue(cp.unitId, cp.id);
      n++;
    }
    return n;
  }

  /** Looks for copies to adopt every `everyMs` (adopt); its failures are logged. */
  startAdopting(everyMs = ADOPT_EVERY_MS): void {
    this.adoptTimer ??= setInterval(() => {
      this.adopt().catch((err: unknown) =>
        this.deps.log.warn({ err }, "looking for checkpoint copies a lost node left failed; tried again later"),
      );
    }, everyMs);
    this.adoptTimer.unref();
  }

  /** The newest earlier checkpoint of the unit that is stored and on this node (its source first), if any. */
  private async parentOf(cp: CheckpointRecord): Promise<string | null> {
    const rows = await this.deps.store.checkpoints.list(cp.unitId);
    return exportParent(rows, cp, (id) => this.deps.runtime.hasCheckpoint(cp.unitId, id));
  }

  /** Retention: queues a look at the unit's local snapshots (once; passes run one at a time). Never throws. */
  private retain(unitId: string): void {
    if (!this.deps.retention || this.closed) return;
    this.toRetain.add(unitId);
    this.retaining ??= this.retainAll().finally(() => {
      this.retaining = undefined;
    });
  }

  private async retainAll(): Promise<void> {
    for (let id = this.first(this.toRetain); id !== undefined && !this.closed; id = this.first(this.toRetain)) {
      this.toRetain.delete(id);
      const unitId = id;
      await this.retainOne(unitId).catch((err: unknown) => {
        // Nothing went, or some did (each only once the store held it): the next copy tries again.
        this.deps.log.warn(
          { unitId, err: err instanceof Error ? err.message : String(err) },
          "evicting a unit's stored checkpoints from the node failed",
        );
      });
    }
  }

  private first(set: ReadonlySet<string>): string | undefined {
    for (const v of set) return v;
    return undefined;
  }

  /**
   * Deletes the unit's local snapshots that retention allows (retention.ts) and that the store is
   * seen to hold now, with every checkpoint of their chains (a row that says `replicated` is not
   * taken on trust: the store may have been changed under the node). The rule is applied again
   * under the unit's lock; meanwhile no export of the unit runs.
   */
  private async retainOne(unitId: string): Promise<void> {
    const retention = this.deps.retention;
    // A unit moving off this node: its snapshots are being sent to the other node (the parent too).
    if (!retention || this.isHeld(unitId)) return;
    const { store, runtime, nodeId, log } = this.deps;
    const isLocal = (id: string) => runtime.hasCheckpoint(unitId, id);
    const ours = (unit: UnitRecord) => nodeId === undefined || unit.nodeId === null || unit.nodeId === nodeId;
    const rule = (unit: UnitRecord, rows: readonly CheckpointRecord[]) =>
      ours(unit) ? evictable({ rows, keep: retention.keep, active: unit.activeCheckpoint, isLocal }) : [];
    // First without the lock: most passes find nothing to do and ask the store nothing.
    const unit = await store.units.getById(unitId);
    if (!unit || rule(unit, await store.checkpoints.list(unitId)).length === 0) return;
    const whole = new Set<string>();
    const seen = new Map<string, Set<string>>();
    for (const o of await unitObjects(this.deps.objects, unitId).list("checkpoints/")) {
      const m = /^checkpoints\/([a-z0-9_-]{1,64})\/(.+)$/.exec(o.key);
      if (m?.[1] && m[2]) seen.set(m[1], (seen.get(m[1]) ?? new Set()).add(m[2]));
    }
    for (const [id, names] of seen) {
      const keys = checkpointKeys(id);
      if ([keys.manifest, keys.stream].every((k) => names.has(k.slice(keys.dir.length)))) whole.add(id);
    }
    let release: (() => void) | undefined;
    try {
      const gone = await retention.evict(unitId, (fresh, rows) => {
        // An export of the unit under way reads its parent's snapshot: this pass gives way (the
        // export's end asks for another).
        if (this.closed || this.current?.unitId === unitId) return [];
        this.evicting.set(unitId, new Promise<void>((r) => (release = r)));
        const byId = new Map(rows.map((c) => [c.id, c]));
        return rule(fresh, rows).filter((id) => (byId.get(id)?.replica?.chain ?? [id]).every((c) => whole.has(c)));
      });
      if (gone.length > 0) log.info({ unitId, checkpoints: gone }, "evicted stored checkpoints from the node");
    } finally {
      this.evicting.delete(unitId);
      release?.();
    }
  }

  private unitStateDir(unitId: string): string {
    return join(this.deps.stateDir, unitId);
  }

  /**
   * A checkpoint was deleted: its export stops, and the copies no remaining checkpoint's chain needs
   * go (a stored stream others are incremental against stays until they go).
   */
  async checkpointDeleted(unitId: string, cpId: string): Promise<void> {
    try {
      await this.dequeue((j) => j.unitId === unitId && j.cpId === cpId);
      await this.collect(unitId);
    } catch (err) {
      // Left in the store; the unit's next checkpoint delete, or its own, collects it.
      this.deps.log.warn({ err, unitId, checkpoint: cpId }, "deleting a checkpoint's copy in the object store failed");
    }
  }

  /** The unit was deleted: every copy of its checkpoints goes. */
  async unitDeleted(unitId: string): Promise<void> {
    try {
      await this.dequeue((j) => j.unitId === unitId);
      const objects = unitObjects(this.deps.objects, unitId);
      for (const o of await objects.list("")) await objects.deleteObject(o.key);
      await this.discardUnfinished(unitId, () => true);
      await rm(this.unitStateDir(unitId), { recursive: true, force: true });
    } catch (err) {
      this.deps.log.warn({ err, unitId }, "deleting a deleted unit's checkpoints from the object store failed");
    }
  }

  /**
   * Before snapshots of the unit are deleted (the unit, a checkpoint, what a move leaves): no copy
   * of the unit starts, and the one under way (which reads a snapshot, and perhaps its parent, that
   * `btrfs subvolume delete` refuses to delete meanwhile: EPERM) is cut and queued again, to resume
   * once the returned function is called.
   */
  async pauseUnit(unitId: string): Promise<() => void> {
    this.hold(unitId);
    const cur = this.current;
    if (cur && cur.unitId === unitId) {
      if (!this.queue.some((j) => j.unitId === cur.unitId && j.cpId === cur.cpId)) this.queue.unshift(cur);
      cur.abort.abort(new Error("the unit's snapshots are being deleted"));
      await cur.done;
    }
    let resumed = false;
    return () => {
      if (resumed) return;
      resumed = true;
      this.release(unitId);
    };
  }

  /** Drops queued jobs that match; cuts the one under way if it matches, and waits for it to end. */
  private async dequeue(match: (j: Job) => boolean): Promise<void> {
    for (let i = this.queue.length - 1; i >= 0; i--) if (match(this.queue[i] as Job)) this.queue.splice(i, 1);
    const cur = this.current;
    if (cur && match(cur)) {
      cur.abort.abort(new Error("the checkpoint was deleted"));
      await cur.done;
    }
  }

  /** Aborts the unfinished uploads (named by their state files) of the unit's checkpoints that `gone` says went. */
  private async discardUnfinished(unitId: string, gone: (cpId: string) => boolean): Promise<void> {
    const dir = this.unitStateDir(unitId);
    const files = await readdir(dir).catch(() => [] as string[]);
    for (const f of files) {
      const id = /^([a-z0-9_-]{1,64})\.export\.json$/.exec(f)?.[1];
      if (id && gone(id)) {
        // A store without AbortMultipartUpload (some test servers) keeps the parts: its lifecycle
        // rules (AbortIncompleteMultipartUpload) remove them; the state goes either way.
        await discardExport({ store: unitObjects(this.deps.objects, unitId), checkpointId: id, stateDir: dir }).catch(
          (err: unknown) => {
            this.deps.log.warn({ err, unitId, checkpoint: id }, "aborting an unfinished upload failed");
            return rm(join(dir, f), { force: true });
          },
        );
      }
    }
  }

  /** Deletes the unit's stored checkpoints that no checkpoint of it needs any more, newest first. */
  private async collect(unitId: string): Promise<void> {
    const objects = unitObjects(this.deps.objects, unitId);
    const needed = new Set<string>();
    for (const c of await this.deps.store.checkpoints.list(unitId)) {
      needed.add(c.id);
      for (const id of c.replica?.chain ?? []) needed.add(id);
    }
    // One listing: each checkpoint no one needs, with what it has in the store.
    const gone = new Map<string, string[]>();
    for (const o of await objects.list("checkpoints/")) {
      const id = /^checkpoints\/([a-z0-9_-]{1,64})\//.exec(o.key)?.[1];
      if (id && !needed.has(id)) gone.set(id, [...(gone.get(id) ?? []), o.key]);
    }
    // Newest first, each as deleteExport goes (its manifest first: never listed without its stream).
    for (const id of [...gone.keys()].reverse()) await deleteExport({ store: objects, checkpointId: id });
    // An unfinished upload of a deleted checkpoint: its parts go, and what it left as objects.
    await this.discardUnfinished(unitId, (id) => !needed.has(id));
    for (const [id, keys] of gone) {
      const { manifest, stream } = checkpointKeys(id);
      for (const key of keys) if (key !== manifest && key !== stream) await objects.deleteObject(key);
    }
  }

  /** Stops: the export under way is cut (resumed at the next start); nothing more starts. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.adoptTimer);
    this.queue.length = 0;
    this.toRetain.clear();
    this.current?.abort.abort(new Error("the server stops"));
    await this.draining;
    await this.retaining;
    (this.deps.objects as Closable).destroy?.();
  }
}
