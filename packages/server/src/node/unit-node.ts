import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import type { ImageRecipe, NetworkLog } from "@ums/protocol";
import type { UnitAgent } from "../agent/client.js";
import type { FsIdentity, RawRead } from "../agent/fs.js";
import type { AgentTunnel } from "../agent/tunnel.js";
import type { ResourceLimits, ResourcesPolicy } from "../runtime/runtime.js";
import type {
  CheckpointRecord,
  ImageRecord,
  OrgRecord,
  TemplateRecord,
  UnitRecord,
  UnitStatus,
} from "../store/records.js";

export type { AgentTunnel, FsIdentity, RawRead, UnitAgent };

/**
 * The node seam (docs/ARCHITECTURE.md section 2). Everything that happens on the host that runs a
 * unit (its runtime, lifecycle, agent, resolver, gateway and internal API) is behind this
 * interface; the API uses nothing else to reach a unit. One implementation runs in this process
 * (`local/`); one that calls a node over the network fits behind the same interface: every call is
 * async, names its unit (a record, which carries the id), and streams where its result streams
 * (the agent's responses, websockets and file bytes).
 *
 * Errors are typed (errors.ts) and mapped to API answers in one place (errors/node-errors.ts).
 */
/** What a wake is for: a node in another process prepares a connection to the agent with it (the default). */
export interface WakeOpts {
  /** False when the lease's first use is not a call to the unit's agent (the proxy's HTTP target). */
  readonly agent?: boolean;
  /**
   * Issue #16: aborted when the caller went away; a wake waiting for a running slot
   * (`wait_for_capacity`) then leaves the queue.
   */
  readonly signal?: AbortSignal;
}

export interface UnitNode {
  /** Where the unit is in its lifecycle (spec 3.1), as its node knows it. */
  status(unitId: string): Promise<UnitStatus>;
  /** Gives a new unit its disk; it costs no process. Returns at once: a boot waits for the disk. */
  create(unit: UnitRecord): Promise<void>;
  /** Gives a new unit a copy of another unit's checkpoint as its disk (fork, spec 3.3). */
  fork(source: UnitRecord, checkpoint: CheckpointRecord, unit: UnitRecord): Promise<void>;
  /** Issue #18: publishes a unit's checkpoint as an organization template (its row and its files). */
  publishTemplate(
    source: UnitRecord,
    checkpoint: CheckpointRecord,
    what: { name: string; description: string },
  ): Promise<TemplateRecord>;
  /** Deletes a template (row and files); units made from it keep their files. */
  deleteTemplate(template: TemplateRecord): Promise<void>;
  /** Gives a new unit a snapshot of a template as its disk (O(1)); `TemplateGoneError` if it was deleted meanwhile. */
  fromTemplate(template: TemplateRecord, unit: UnitRecord): Promise<void>;
  /**
   * Issue #18: imports the OCI / `docker save` archive `body` streams as the organization's image
   * `name`; `ImageExistsError` (store) when the name is taken, `ImageArchiveError` for an archive
   * ums cannot use. `progress` tells of each step once the archive is read.
   */
  importImage(
    org: OrgRecord,
    name: string,
    body: Readable,
    hooks: { progress: Progress; signal?: AbortSignal },
  ): Promise<ImageRecord>;
  /**
   * Issue #18: builds the organization's image `recipe.name` from a recipe; `steps`, when the recipe
   * has steps, runs them in a unit made from the draft (`fillDraft`) and names the checkpoint of
   * it that becomes the image. `ImageExistsError` (store) when the name is taken.
   */
  buildImage(
    org: OrgRecord,
    recipe: ImageRecipe,
    source: string,
    hooks: {
      progress: Progress;
      signal?: AbortSignal;
      steps?: (draftId: string) => Promise<{ unitId: string; checkpoint: string }>;
    },
  ): Promise<ImageRecord>;
  /** Gives the unit that runs a recipe's steps a writable snapshot of the image's draft. */
  fillDraft(imageId: string, unit: UnitRecord): Promise<void>;
  /** The host's base image (`base` in GET /v1/images): its size and when it was built. */
  baseImage(): Promise<{ readonly bytes: number; readonly builtAt: string }>;
  /** Deletes an image (row and files); `ImageInUseError` while units or templates refer to it. */
  deleteImage(image: ImageRecord): Promise<void>;
  /** Gives a new unit a snapshot of an image as its disk (O(1)); `ImageGoneError` if it was deleted meanwhile. */
  fromImage(image: ImageRecord, unit: UnitRecord): Promise<void>;
  /**
   * Removes the unit and every host resource it had, and its record once nothing of the unit can
   * run again; false when the record was gone already. A crash part way is finished at the node's
   * next start.
   */
  destroy(unit: UnitRecord): Promise<boolean>;
  /** Spec 2.4: healthy when the agent answers in time; an unhealthy unit is restarted by the next wake. */
  health(unit: UnitRecord): Promise<UnitHealth>;
  /**
   * Makes sure the unit runs (booting or resuming it) and holds it awake until the lease is
   * released. Fails with `RunningLimitError` when its organization runs its limit of busy units
   * (a unit created with `wait_for_capacity` first waits its turn for a slot, up to 60 s),
   * `UnitStartError` when it could not be started.
   */
  wake(org: OrgRecord, unit: UnitRecord, opts?: WakeOpts): Promise<UnitLease>;

  /** Spec 4.2: saves the unit's files (and its policies, from the record) as its next checkpoint. */
  checkpoint(unit: UnitRecord, comment: string, progress: Progress): Promise<CheckpointResult>;
  /** Spec 3.3: saves the current state, then makes the unit's files and policies the checkpoint's and boots it. */
  restore(
    org: OrgRecord,
    unit: UnitRecord,
    checkpoint: CheckpointRecord,
    progress: Progress,
  ): Promise<CheckpointRecord>;
  /**
   * Issue #18: moves a unit made from an image to a newer build of it where that is safe, saving
   * its state first (the checkpoint returned); `UpgradeRefusedError` with the reasons otherwise.
   */
  upgrade(org: OrgRecord, unit: UnitRecord, to: ImageRecord, progress: Progress): Promise<CheckpointRecord>;
  /** Deletes a checkpoint; the active one cannot be (`ActiveCheckpointError`). */
  deleteCheckpoint(unit: UnitRecord, checkpoint: CheckpointRecord): Promise<void>;
  /**
   * Which of the unit's checkpoints can be restored (spec 2.6 health): their files are on the node,
   * or (issue #15) the object store holds them (`replicated`, as their rows say) and the node has one.
   */
  checkpointsPresent(
    unitId: string,
    ids: readonly string[],
    replicated?: ReadonlySet<string>,
  ): Promise<ReadonlySet<string>>;

  /**
   * Issue #15, a unit's move to another node (docs/SCALE-OUT.md), on the node that holds it: no wake
   * starts it here from now on; it is stopped (`UnitBusyError` while a request holds it), its files
   * saved as a checkpoint; returns that checkpoint. `moveDone` then removes the unit here but its
   * newest snapshot (the parent of a move back) and those the object store does not hold yet (this
   * node goes on copying them); `moveAborted` makes it this node's again. A checkpoint is copied to
   * the store by the node it was taken on.
   */
  moveOut(unit: UnitRecord, progress: Progress): Promise<CheckpointRecord>;
  moveDone(unit: UnitRecord): Promise<void>;
  moveAborted(unit: UnitRecord): Promise<void>;
  /**
   * On the node it moves to: receives the unit's checkpoint `checkpoint` straight from node `from`
   * (incremental against a snapshot both have), else from the object store, and makes it the
   * unit's files.
   */
  moveIn(unit: UnitRecord, checkpoint: CheckpointRecord, progress: Progress, from?: string): Promise<void>;

  /** The limits units get where their resources policy names none, and the most CPU one may have. */
  resourceLimits(): Promise<ResourceLimits>;
  /** Applies a running unit's resources policy where the kernel allows; false: it waits for the next boot. */
  applyResources(unitId: string, resources: ResourcesPolicy): Promise<boolean>;
  /** Enforces a unit's new network policy (spec 2.10, as JSON) from now on, when it runs. */
  applyNetworkPolicy(unitId: string, policyJson: string): Promise<void>;
  /** What the unit's egress policy decided lately (spec 4.5 network report). */
  networkReport(unitId: string, limit: number): Promise<NetworkLog>;
}

export type Progress = (message: string) => void;

export interface UnitHealth {
  readonly status: "healthy" | "hibernated" | "unhealthy";
  readonly reason: string | null;
}

export interface CheckpointResult {
  readonly checkpoint: CheckpointRecord;
  /** How long the unit's processes were frozen (0 when it was not running). */
  readonly frozenMs: number;
}

/** A unit's HTTP target: its address and port, and (issue #15, a unit on another node) how to connect to it. */
export interface HttpTarget {
  readonly host: string;
  readonly port: number;
  /** A connection to the target made for this process (the node splices it); absent: connect to host:port. */
  readonly connect?: (done: (err: Error | null, socket?: Socket) => void) => void;
}

/** A woken unit, held awake until `release()`. */
export interface UnitLease {
  readonly unit: UnitRecord;
  /** Whether this wake started the unit (it was cold): connections kept from before lead nowhere. */
  readonly booted: boolean;
  /**
   * The unit's agent. A call that finds it gone (the unit died since it was last seen alive) has
   * the node check the unit, boot it again if need be, and try once more.
   */
  readonly agent: UnitAgent;
  /** Where the unit's HTTP target (spec 4.1: port 8080, or a service's `http_port`) is reached from here. */
  httpTarget(): Promise<HttpTarget>;
  /** The unit's services changed (spec 2.7): its HTTP target is asked again. */
  servicesChanged(): void;
  /** Ends the hold; more calls are no-ops. */
  release(): void;
}
