import type { Readable } from "node:stream";
import type { ImageConfig, ImageRecipe, PrivilegesPolicy, ResourcesPolicy } from "@ums/protocol";
import type { ImportedImage } from "./runc/imported-images.js";

export type { ImportedImage, PrivilegesPolicy, ResourcesPolicy };

export interface StopOpts {
  /**
   * A boot of the unit follows at once (a restore): its network namespace and link stay, and that
   * boot takes them with their rules reset. Removing a link waits for the kernel (~30-50 ms here:
   * a veth's deletion waits for RCU), and making one again costs the boot a namespace. A failure
   * before that boot stops the unit again without the option.
   */
  readonly keepLink?: boolean;
}

export interface BootSpec {
  readonly unitId: string;
  readonly name: string;
  readonly url: string;
  readonly resources: ResourcesPolicy;
  readonly privileges: PrivilegesPolicy;
  /** The network policy (spec 2.10) as JSON: enforced from the unit's first packet, shown at /.unit/policy/network.json. */
  readonly network: string;
  /** Issue #18: the organization image the unit was made from (undefined: the base image) and its config. */
  readonly image?: { readonly id: string; readonly config: ImageConfig } | undefined;
}

/** A running unit's link: its gateway (the host end, where ums serves DNS and the gateway) and its address. */
export interface UnitLink {
  readonly hostIp: string;
  readonly unitIp: string;
}

export interface EgressDrops {
  readonly packets: number;
  /** Destinations dropped within the last hour, the most recent first, each with its packets and last drop (ms). */
  readonly destinations: readonly { address: string; packets: number; lastDropMs: number }[];
}

/** An address a unit may reach for `timeoutS` seconds (issue #6: from an allowed DNS answer). */
export interface EgressAllowance {
  readonly ip: string;
  readonly timeoutS: number;
}

export type RuntimeState = "running" | "paused" | "stopped";

/** Every limit of a resources policy, set. */
export type FullResources = { readonly [K in keyof ResourcesPolicy]-?: NonNullable<ResourcesPolicy[K]> };

export interface ResourceLimits {
  /** What a unit gets where its resources policy names no limit (the server's configuration). */
  readonly defaults: FullResources;
  /** The most CPU one unit may be given, in cores: what all units together may use on this host. */
  readonly maxCpuCores: number;
}

export interface UnitStats {
  /** CPU time used since boot, in nanoseconds. */
  readonly cpuNs: number;
}

/**
 * Where a running unit's usage is read on the host (issue #17): kernel files (cgroup v1, sysfs)
 * only, never a path inside the unit's rootfs or any directory the unit can write.
 */
export interface UsageSources {
  /** The unit's cgroup below each v1 controller, e.g. `/sys/fs/cgroup/memory/ums-x/<id>`. */
  readonly cpuacct: string;
  readonly memory: string;
  readonly pids: string;
  /** The host end of its veth pair: `/sys/class/net/<if>/statistics` (rx there is what the unit sent). */
  readonly netStats: string | undefined;
  /** Its btrfs quota group: `/sys/fs/btrfs/<uuid>/qgroups/1_<n>` (undefined while quotas are off). */
  readonly qgroup: string | undefined;
}

/**
 * How units run on a host (docs/ARCHITECTURE.md section 1). One implementation per folder: `runc/` today;
 * a microVM or gVisor runtime fits behind the same interface.
 */
export interface UnitRuntime {
  /**
   * Gives the unit its disk (a writable snapshot of the base image, or of the organization image
   * `imageId`); it costs no process. Idempotent: a unit that has its disk keeps it.
   */
  create(unitId: string, imageId?: string): Promise<void>;
  /** Starts the unit and returns once its agent answers. */
  boot(spec: BootSpec): Promise<void>;
  pause(unitId: string): Promise<void>;
  resume(unitId: string): Promise<void>;
  /** Stops every process of the unit; its disk stays. */
  stop(unitId: string, opts?: StopOpts): Promise<void>;
  /**
   * Removes the unit and every host resource it had but a tombstone, written first, that says it is
   * being deleted (idempotent). `forget` removes the tombstone once the unit's record is gone; a
   * crash before that leaves it for `deleting` to report at the next start.
   */
  destroy(unitId: string): Promise<void>;
  forget(unitId: string): Promise<void>;
  /**
   * Issue #15: the unit moved to another node: everything of it goes but the snapshots of
   * checkpoints `keep` (marked retired; again with fewer, the others go). `unretire` makes them the
   * unit's again; `retired` lists such units; `destroy` + `forget` remove one for good.
   */
  retire(unitId: string, keep: readonly string[]): Promise<void>;
  /** The first step of `retire` alone (durable): from now on the unit is retired here, whatever happens. */
  markRetired(unitId: string): Promise<void>;
  unretire(unitId: string): Promise<void>;
  retired(): Promise<string[]>;
  isRetired(unitId: string): Promise<boolean>;
  /** Units whose delete a crash interrupted: destroy them again, drop their records, forget them. */
  deleting(): Promise<string[]>;
  state(unitId: string): Promise<RuntimeState>;
  /** Cheap liveness check of a unit believed to run (no process spawned): false once its processes are gone. */
  isAlive(unitId: string): Promise<boolean>;
  /** Units that run (or are paused) on this host now, e.g. after a restart of the server. */
  running(): Promise<Map<string, RuntimeState>>;
  /** The Unix socket of the unit's agent on the host. */
  agentSocket(unitId: string): string;
  /** Where ums listens for the unit's internal API calls (the agent forwards them), and its owner. */
  hostSocket(unitId: string): { readonly path: string; readonly uid: number };
  /** The unit's address as the host reaches it, while it runs. */
  address(unitId: string): string | undefined;
  /** The unit's link while it runs. */
  link(unitId: string): UnitLink | undefined;
  /**
   * The running unit a packet with this source address came from. Trustworthy: the firewall drops
   * packets whose source is not their unit's own address (anti-spoofing, runtime/network/firewall.ts).
   */
  unitOfAddress(ip: string): string | undefined;
  /** Sets a running unit's egress mode and replaces its allowed addresses, atomically. */
  setEgress(unitId: string, enforced: boolean, allow: readonly EgressAllowance[]): Promise<void>;
  /** Adds allowed addresses (or extends their time) for a running unit. */
  allowEgress(unitId: string, allow: readonly EgressAllowance[]): Promise<void>;
  /** What a running unit's egress rules dropped since it booted (undefined when not running). */
  egressDrops(unitId: string): Promise<EgressDrops | undefined>;
  /** Publishes the network policy the unit sees read-only at /.unit/policy/network.json. */
  publishNetworkPolicy(unitId: string, json: string): Promise<void>;
  stats(unitId: string): Promise<UnitStats | undefined>;
  /** Where a running unit's usage is read (issue #17); runtimes without cgroups omit it. */
  usageSources?(unitId: string): UsageSources | undefined;
  /** The host path of the file a unit's PID 1 and agent write their output to (runtimes without one omit it). */
  agentLog?(unitId: string): string;
  /** The device of the unit's files (its rootfs) as this host sees them (issue #16: reads sent by descriptor). */
  filesDevice?(unitId: string): number | undefined;
  /** Applies the memory, pids and CPU limits to a running unit where the kernel allows; false when they must wait for the next boot. */
  applyResources(unitId: string, resources: ResourcesPolicy): Promise<boolean>;
  resourceLimits(): ResourceLimits;
  /**
   * A read-only snapshot of the unit's files as checkpoint `cpId`. A running unit is frozen for the
   * instant of the snapshot (its processes see no change, a file being written is consistent);
   * returns how long it was frozen.
   */
  checkpoint(unitId: string, cpId: string): Promise<{ frozenMs: number }>;
  /** Whether checkpoint `cpId`'s snapshot is there, whole (spec 2.6 health): not one still being received. */
  hasCheckpoint(unitId: string, cpId: string): boolean;
  /**
   * Issue #15: checkpoint `cpId` is about to be received into `checkpointDir` (from the object store
   * or another node); call the returned function once its snapshot is whole. Until then it is not
   * `hasCheckpoint`, and a crash leaves it to be removed at the next start (`recover`).
   */
  receiving(unitId: string, cpId: string): Promise<() => Promise<void>>;
  /**
   * Issue #15: the host directory of the unit's checkpoint snapshots (each `<dir>/<cpId>`, read-only),
   * for their export to and import from the object store; outside anything the unit can write.
   */
  checkpointDir(unitId: string): string;
  /** The unit's checkpoints changed behind `checkpoint` (one was received from the store): its view shows them. */
  checkpointsChanged(unitId: string): Promise<void>;
  /**
   * Replaces the files of a stopped unit with checkpoint `cpId`'s. Journaled: until
   * `completeRestore`, a crash is rolled forward by `recover` (the new files are in place).
   */
  restoreDisk(unitId: string, cpId: string): Promise<void>;
  /** Drops the files a restore replaced and its journal. */
  completeRestore(unitId: string): Promise<void>;
  deleteCheckpoint(unitId: string, cpId: string): Promise<void>;
  /** Gives a new unit a writable copy of another unit's checkpoint (O(1): a snapshot). */
  forkDisk(srcUnitId: string, cpId: string, newUnitId: string): Promise<void>;
  /** Issue #18: snapshots a unit's checkpoint as template `templateId`, read-only (O(1)). */
  publishTemplate(unitId: string, cpId: string, templateId: string): Promise<void>;
  /** Deletes a template's files (idempotent); units made from it keep theirs. */
  deleteTemplate(templateId: string): Promise<void>;
  /** Gives a new unit a writable copy of a template (O(1): a snapshot). */
  templateDisk(templateId: string, unitId: string): Promise<void>;
  /**
   * Issue #18: imports the OCI or `docker save` archive `body` streams (an upload) as image
   * `imageId`, read-only; nothing is left when it fails (ImageArchiveError: an archive ums cannot
   * use; the body's error when it fails or `signal` aborts).
   */
  importImage(
    imageId: string,
    body: Readable,
    progress: (message: string) => void,
    signal?: AbortSignal,
  ): Promise<ImportedImage>;
  /**
   * Issue #18: the draft of a recipe's image `imageId`: its base (with the recipe's packages, an
   * image build cached by the package list) snapshotted, and the recipe's files written in it.
   */
  draftRecipeImage(
    imageId: string,
    recipe: ImageRecipe,
    progress: (message: string) => void,
    signal?: AbortSignal,
  ): Promise<void>;
  /** The image's files become a unit's checkpoint: the unit the recipe's steps ran in. */
  imageFromCheckpoint(imageId: string, unitId: string, cpId: string): Promise<void>;
  /** Makes a recipe's image read-only; returns its units' config (env, user, workdir resolved in it) and size. */
  sealRecipeImage(imageId: string, recipe: ImageRecipe): Promise<{ config: ImageConfig; bytes: number }>;
  /** The host's base image: its size and when it was built (from its manifest). */
  baseImage(): Promise<{ readonly bytes: number; readonly builtAt: string }>;
  /** Deletes an imported image's files (idempotent); units made from it keep theirs. */
  deleteImage(imageId: string): Promise<void>;
  /**
   * After a crash: rolls back a restore that had not put the new files in place, and reports the
   * ones that had (the caller records them, then calls `completeRestore`); removes checkpoint
   * snapshots the database does not know (`known` answers per unit; undefined: not this server's).
   */
  recover(
    known: (unitId: string) => Promise<ReadonlySet<string> | undefined>,
  ): Promise<{ unitId: string; checkpoint: string; image?: { id: string; version: string } }[]>;
  /**
   * Issue #18: the system files (upgrade.ts SYSTEM_TREES) the unit changed since it was made from
   * image build `imageId`: compared from checkpoint `cpId`'s snapshot, or from the unit's disk as it
   * is now; `problems` are what keeps its system trees (or the build's) from being replaced.
   */
  upgradeCheck(
    unitId: string,
    imageId: string,
    cpId?: string,
  ): Promise<{ paths: string[]; count: number; problems: string[] }>;
  /**
   * Replaces a stopped unit's disk with checkpoint `cpId`'s files whose system trees are build
   * `image`'s. Journaled like `restoreDisk` (`completeRestore` finishes it; `recover` rolls it
   * forward with the image); a failure part way leaves the disk as it was.
   */
  upgradeDisk(unitId: string, cpId: string, image: { id: string; version: string }): Promise<void>;
  /** Lets units reach the connector gateway on this host port (issue #7); runtimes without a firewall omit it. */
  allowGatewayPort?(port: number): Promise<void>;
  close(): Promise<void>;
}
