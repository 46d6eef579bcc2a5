import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type { ImageConfig, ImageRecipe } from "@ums/protocol";
import { settled } from "../../util/settled.js";
import type { AllowedAddress } from "../network/egress.js";
import { allowGatewayPort } from "../network/firewall.js";
import type {
  BootSpec,
  EgressDrops,
  ResourceLimits,
  ResourcesPolicy,
  RuntimeState,
  StopOpts,
  UnitLink,
  UnitRuntime,
  UnitStats,
  UsageSources,
} from "../runtime.js";
import { deleteSubvolume, enableSimpleQuota, filesystemUuid, sweepQgroups } from "../storage/btrfs.js";
import { bootUnit } from "./boot.js";
import {
  CGROUP_ROOT,
  cgroupHasTasks,
  cgroupState,
  cgroupStats,
  killCgroup,
  removeCgroups,
  setFrozen,
} from "./cgroups.js";
import { beginReceive, deleteCheckpoint, takeCheckpoint } from "./checkpoints.js";
import type { RuncRuntimeConfig } from "./config.js";
import { CpuWeights } from "./cpu-weights.js";
import { EgressState } from "./egress-state.js";
import { prepareHost } from "./host-setup.js";
import { type ImportedImage, importedPath, importImage, removeImported, uploadDir } from "./imported-images.js";
import { raiseKeyQuota } from "./key-quota.js";
import { draftRecipeImage, imageFromCheckpoint, type RecipeContext, sealRecipeImage } from "./recipe-images.js";
import { completeRestore, recoverDisks, restoreDisk } from "./restore.js";
import { publishNetworkPolicy } from "./run-dir.js";
import { Runc } from "./runc.js";
import { deleteTemplate, publishTemplate, templateDisk } from "./templates.js";
import {
  createDisk,
  deletingDisks,
  destroyDisk,
  forgetDisk,
  forkDisk,
  isRetiredDisk,
  limitDisk,
  markRetired,
  retireDisk,
  retiredDisks,
  unitQgroup,
  unretireDisk,
} from "./unit-disk.js";
import { UnitLinks } from "./unit-links.js";
import { UnitPaths } from "./unit-paths.js";
import { UnitResources } from "./unit-resources.js";
import { changedSystemPaths, layoutProblems, snapshotForCheck, upgradeDisk } from "./upgrade.js";

/** Units as runc containers on btrfs snapshots (docs/ARCHITECTURE.md sections 1 and 4). */
export class RuncRuntime implements UnitRuntime {
  private readonly paths: UnitPaths;
  private readonly runc: Runc;
  private readonly links: UnitLinks;
  private readonly resources: UnitResources;
  /** The pool's path when its quotas are on (units' disk limits are enforced). */
  private quotaPool: string | undefined;
  /** The pool's filesystem uuid when its quotas are on: units' quota groups are read in sysfs. */
  private poolUuid: string | undefined;
  /** Why units' disk limits are not enforced on this host, if they are not. */
  quotaError: string | undefined;
  /** What the start raised of the kernel's key quota (key-quota.ts), or why it could not. */
  keyQuota: { raised: string[]; error?: string } = { raised: [] };
  /** The start's sweep of unused quota groups (storage/btrfs.ts), awaited by close. */
  private sweeping: Promise<number> | undefined;
  private closing = false;
  /** The disk limit last set for each unit since this start (a boot with the same one skips the call). */
  private readonly diskLimits = new Map<string, number>();

  /** Sets the unit's disk size (its quota group's limit) unless it is already set to `bytes`. */
  private async limitDisk(id: string, bytes: number): Promise<void> {
    if (this.diskLimits.get(id) === bytes) return;
    if (await limitDisk(this.paths, id, this.quotaPool, bytes)) this.diskLimits.set(id, bytes);
  }
  private readonly egress: EgressState;
  private readonly hostCores: number;
  /** Units pressing against their limits weigh less than the others while they do. */
  private readonly weights: CpuWeights;

  /** The mounted pool units live on. */
  get poolDir(): string {
    return this.cfg.poolDir;
  }

  /** Received checkpoints being written out (receiving). */
  private readonly settling = new Set<Promise<void>>();

  private constructor(private readonly cfg: RuncRuntimeConfig) {
    this.paths = new UnitPaths(cfg.dataDir, cfg.poolDir, cfg.rid);
    this.runc = new Runc(this.paths.runcRoot);
    this.egress = new EgressState(cfg.rid, cfg.egressRanges !== undefined);
    this.links = new UnitLinks(cfg.rid, cfg.subnet, this.paths, this.egress);
    this.hostCores = cfg.hostCores ?? availableParallelism();
    this.resources = new UnitResources(
      {
        memoryBytes: cfg.defaultMemoryBytes,
        pids: cfg.defaultPids,
        cpuCores: cfg.defaultCpuCores,
        diskBytes: cfg.defaultDiskBytes,
      },
      this.hostCores,
    );
    this.weights = new CpuWeights(CGROUP_ROOT, cfg.rid);
  }

  static async open(cfg: RuncRuntimeConfig): Promise<RuncRuntime> {
    const rt = new RuncRuntime(Object.freeze({ ...cfg }));
    await prepareHost(rt.cfg, rt.paths, rt.hostCores);
    rt.keyQuota = await raiseKeyQuota().then(
      (raised) => ({ raised }),
      (err: Error) => ({ raised: [], error: err.message }),
    );
    // Units' disk limits need simple quotas on the pool (storage/btrfs.ts); a kernel without them
    // (before 6.7) runs units without disk limits, and says so.
    try {
      await enableSimpleQuota(cfg.poolDir);
      rt.quotaPool = cfg.poolDir;
      rt.poolUuid = await filesystemUuid(cfg.poolDir);
      // Groups of units deleted while their removal failed: in the background, nothing waits on it.
      rt.sweeping = sweepQgroups(cfg.poolDir, () => rt.closing).catch(() => 0);
    } catch (err) {
      rt.quotaError = (err as Error).message;
    }
    await rt.egress.start();
    await rt.stopOldLayoutUnits();
    await rt.links.recover(await rt.running());
    await rt.reassertCheckpointViews();
    rt.weights.start();
    return rt;
  }

  agentSocket(id: string): string {
    return this.paths.unit(id).agentSocket;
  }

  /** In the host-owned directory the unit sees read-only at /.unit/run. */
  hostSocket(id: string): { path: string; uid: number } {
    return { path: this.paths.unit(id).hostSocket, uid: this.cfg.idShift };
  }

  async allowGatewayPort(port: number): Promise<void> {
    // A configured port is in the firewall since installFirewall; an ephemeral one is added now.
    if (port !== this.cfg.gatewayPort) await allowGatewayPort(this.cfg.rid, port);
  }

  address(id: string): string | undefined {
    return this.links.get(id)?.unitIp;
  }

  link(id: string): UnitLink | undefined {
    return this.links.link(id);
  }

  unitOfAddress(ip: string): string | undefined {
    return this.links.unitOfAddress(ip);
  }

  async setEgress(id: string, enforced: boolean, allow: readonly AllowedAddress[]): Promise<void> {
    await this.egress.set(id, this.links.get(id), enforced, allow);
  }

  async allowEgress(id: string, allow: readonly AllowedAddress[]): Promise<void> {
    await this.egress.allow(id, this.links.get(id), allow);
  }

  async egressDrops(id: string): Promise<EgressDrops | undefined> {
    return this.egress.drops(this.links.get(id));
  }

  async publishNetworkPolicy(id: string, json: string): Promise<void> {
    await publishNetworkPolicy(this.paths, id, json);
  }

  /** Idempotent: a unit that has its disk keeps it. */
  async create(id: string, imageId?: string): Promise<void> {
    await createDisk(this.paths, imageId ? importedPath(this.paths, imageId) : this.cfg.imagePath, id);
  }

  async boot(spec: BootSpec): Promise<void> {
    const id = spec.unitId;
    const state = await this.state(id);
    if (state === "running") return;
    if (state === "paused") return this.resume(id);
    await this.runc.delete(id); // a stopped leftover
    await this.create(id, spec.image?.id); // a unit whose disk was not made yet (e.g. a crash right after create)
    await bootUnit(
      {
        cfg: this.cfg,
        paths: this.paths,
        runc: this.runc,
        links: this.links,
        resources: this.resources,
        diskGroup: () => this.usageSources(id)?.qgroup,
        // Its disk size: its quota group is made at its first boot, and the policy (a restore's, say)
        // may have changed while it was stopped.
        limitDisk: () => this.limitDisk(id, this.resources.diskBytes(spec.resources)),
        state: (unitId) => this.state(unitId),
        stop: (unitId) => this.stop(unitId),
      },
      spec,
    );
  }

  /**
   * Units booted by a ums before the host made the agent's socket (their agent listens in a
   * directory the unit can write, which the host no longer connects into) are stopped: their next
   * use boots them with the host-owned layout.
   */
  /** Re-adoption: every running unit's checkpoints are read-only mounts in it (checkpoint-view.ts). */
  private async reassertCheckpointViews(): Promise<void> {
    for (const c of await this.runc.list()) {
      if (c.status === "running" || c.status === "paused") await this.paths.checkpointView(c.id).reassert(c.pid);
    }
  }

  private async stopOldLayoutUnits(): Promise<void> {
    for (const id of (await this.running()).keys()) {
      if (existsSync(this.agentSocket(id))) continue;
      await killCgroup(this.paths.unit(id).cgroup);
      await this.runc.delete(id);
    }
  }

  /**
   * Pause and resume write the unit's freezer cgroup directly (what `runc pause/resume` do, minus
   * a process spawn of ~8 ms each way); runc reads the freezer to report the state, so `runc list`
   * stays right. Hosts without the v1 freezer fall back to runc.
   */
  async pause(id: string): Promise<void> {
    if (!(await setFrozen(this.paths.unit(id).cgroup, true))) await this.runc.pause(id);
  }

  async resume(id: string): Promise<void> {
    if (!(await setFrozen(this.paths.unit(id).cgroup, false))) await this.runc.resume(id);
  }

  async stop(id: string, opts: StopOpts = {}): Promise<void> {
    // `runc delete --force` sleeps 100 ms before it looks again; killing the cgroup's tasks here
    // first makes the delete immediate.
    const container = killCgroup(this.paths.unit(id).cgroup).then(() => this.runc.delete(id));
    await container.catch(() => {});
    // Whatever came of that: its mounts and its link go, both at once (they have nothing to do with
    // each other); the first failure is reported.
    await settled([
      container,
      this.paths.checkpointView(id).teardown(),
      opts.keepLink ? Promise.resolve() : this.links.detach(id),
    ]);
  }

  async destroy(id: string): Promise<void> {
    await this.stop(id);
    await destroyDisk(this.paths, id, this.quotaPool);
    this.diskLimits.delete(id);
  }

  async forget(id: string): Promise<void> {
    await forgetDisk(this.paths, id);
  }

  async retire(id: string, keep: readonly string[]): Promise<void> {
    await this.stop(id);
    await retireDisk(this.paths, id, keep, this.quotaPool);
    this.diskLimits.delete(id);
  }

  markRetired(id: string): Promise<void> {
    return markRetired(this.paths, id);
  }

  unretire(id: string): Promise<void> {
    return unretireDisk(this.paths, id);
  }

  retired(): Promise<string[]> {
    return retiredDisks(this.paths);
  }

  async isRetired(id: string): Promise<boolean> {
    return isRetiredDisk(this.paths, id);
  }

  deleting(): Promise<string[]> {
    return deletingDisks(this.paths);
  }

  async state(id: string): Promise<RuntimeState> {
    // A container runc has no state for is stopped, as `runc state` says; else its cgroups tell.
    if (!this.runc.exists(id)) return "stopped";
    const quick = await cgroupState(this.paths.unit(id).cgroup);
    if (quick) return quick;
    const s = await this.runc.state(id);
    if (!s) return "stopped";
    return s.status === "running" ? "running" : s.status === "paused" ? "paused" : "stopped";
  }

  async isAlive(id: string): Promise<boolean> {
    // Without a v1 pids cgroup to read: ask runc.
    return (await cgroupHasTasks(this.paths.unit(id).cgroup)) ?? (await this.state(id)) !== "stopped";
  }

  async running(): Promise<Map<string, RuntimeState>> {
    const out = new Map<string, RuntimeState>();
    for (const c of await this.runc.list()) {
      if (c.status === "running" || c.status === "paused") out.set(c.id, c.status);
    }
    return out;
  }

  async stats(id: string): Promise<UnitStats | undefined> {
    return cgroupStats(this.paths.unit(id).cgroup);
  }

  agentLog(id: string): string {
    return join(this.paths.unit(id).run, "agent.log");
  }

  filesDevice(id: string): number | undefined {
    // The rootfs is the unit's subvolume (its own device); a host path, never one inside it.
    try {
      return statSync(this.paths.unit(id).rootfs).dev;
    } catch {
      return undefined;
    }
  }

  /**
   * Kernel files only (issue #17): its cgroups, the host end of its veth, its quota group in sysfs.
   * The quota group's name is in `<disk>/qgroup`, a host-owned file beside (not in) its rootfs.
   */
  usageSources(id: string): UsageSources | undefined {
    const cg = this.paths.unit(id).cgroup;
    const net = this.links.get(id);
    const group = this.poolUuid ? unitQgroup(this.paths, id) : undefined;
    return {
      cpuacct: `${CGROUP_ROOT}/cpuacct${cg}`,
      memory: `${CGROUP_ROOT}/memory${cg}`,
      pids: `${CGROUP_ROOT}/pids${cg}`,
      netStats: net && `/sys/class/net/${net.hostIf}/statistics`,
      qgroup: group && `/sys/fs/btrfs/${this.poolUuid}/qgroups/${group.replace("/", "_")}`,
    };
  }

  resourceLimits(): ResourceLimits {
    return this.resources.limits();
  }

  async applyResources(id: string, r: ResourcesPolicy): Promise<boolean> {
    // The disk size holds at once, running or not; the rest needs a running container.
    await this.limitDisk(id, this.resources.diskBytes(r));
    if ((await this.state(id)) === "stopped") return false;
    return this.resources.apply(this.paths.runcRoot, id, r);
  }

  async checkpoint(id: string, cpId: string): Promise<{ frozenMs: number }> {
    await this.create(id);
    return takeCheckpoint(this.paths, this, id, cpId);
  }

  checkpointDir(id: string): string {
    return this.paths.unit(id).checkpoints;
  }

  checkpointsChanged(id: string): Promise<void> {
    return this.paths.checkpointView(id).refresh();
  }

  hasCheckpoint(id: string, cpId: string): boolean {
    return existsSync(this.paths.checkpoint(id, cpId)) && !this.paths.isPartial(id, cpId);
  }

  /**
   * Once the snapshot is whole it is the checkpoint at once (UnitPaths.whole); its files are
   * written out and its mark removed in the background (a `btrfs filesystem sync` of 1 GiB takes
   * seconds, which a move or a restore does not wait for). A host crash before that leaves the
   * mark: the next start removes the snapshot, which is received again when needed.
   */
  async receiving(id: string, cpId: string): Promise<() => Promise<void>> {
    const settle = await beginReceive(this.paths, id, cpId);
    return async () => {
      const key = `${id}/${cpId}`;
      if (existsSync(this.paths.checkpoint(id, cpId))) this.paths.whole.add(key);
      const settling: Promise<void> = settle()
        .catch((err: unknown) =>
          process.emitWarning(
            `the received checkpoint ${cpId} of ${id} could not be written out (${(err as Error).message}); the next start receives it again`,
            "ReplicationWarning",
          ),
        )
        .finally(() => {
          this.paths.whole.delete(key);
          this.settling.delete(settling);
        });
      this.settling.add(settling);
    };
  }

  /** All-or-nothing through the restore journal (restore.ts). */
  async restoreDisk(id: string, cpId: string): Promise<void> {
    if ((await this.state(id)) !== "stopped") throw new Error("restoreDisk needs a stopped unit");
    await restoreDisk(this.paths, id, cpId);
  }

  async upgradeCheck(
    id: string,
    imageId: string,
    cpId?: string,
  ): Promise<{ paths: string[]; count: number; problems: string[] }> {
    const build = importedPath(this.paths, imageId);
    if (!existsSync(build)) {
      return { paths: [], count: 0, problems: ["the files of the build the unit was made from are gone"] };
    }
    const snap = cpId ? this.paths.checkpoint(id, cpId) : await snapshotForCheck(this.paths, id);
    try {
      const changed = await changedSystemPaths(build, snap);
      return { ...changed, problems: await layoutProblems(snap, "the unit") };
    } finally {
      if (!cpId) await deleteSubvolume(snap);
    }
  }

  async upgradeDisk(id: string, cpId: string, image: { id: string; version: string }): Promise<void> {
    if ((await this.state(id)) !== "stopped") throw new Error("upgradeDisk needs a stopped unit");
    await upgradeDisk(this.paths, id, cpId, image);
  }

  async completeRestore(id: string): Promise<void> {
    await completeRestore(this.paths, id);
  }

  async deleteCheckpoint(id: string, cpId: string): Promise<void> {
    await deleteCheckpoint(this.paths, id, cpId);
  }

  async forkDisk(srcId: string, cpId: string, newId: string): Promise<void> {
    await forkDisk(this.paths, srcId, cpId, newId);
  }

  async publishTemplate(unitId: string, cpId: string, templateId: string): Promise<void> {
    await publishTemplate(this.paths, unitId, cpId, templateId);
  }

  async deleteTemplate(templateId: string): Promise<void> {
    await deleteTemplate(this.paths, templateId);
  }

  async templateDisk(templateId: string, unitId: string): Promise<void> {
    await templateDisk(this.paths, templateId, unitId);
  }

  async importImage(
    imageId: string,
    body: Readable,
    progress: (message: string) => void,
    signal?: AbortSignal,
  ): Promise<ImportedImage> {
    return importImage(this.paths, imageId, body, {
      uploadDir: await this.uploadDir(),
      uidShift: this.cfg.idShift,
      uidRange: this.cfg.idCount,
      progress,
      ...(signal && { signal }),
    });
  }

  private uploads: Promise<string> | undefined;

  /** Where imports write their uploads: decided at the first (imported-images.ts uploadDir), tried again if that failed. */
  private uploadDir(): Promise<string> {
    this.uploads ??= uploadDir(this.paths).catch((err: unknown) => {
      this.uploads = undefined;
      throw err;
    });
    return this.uploads;
  }

  private get recipeContext(): RecipeContext {
    return {
      paths: this.paths,
      poolDir: this.cfg.poolDir,
      imagePath: this.cfg.imagePath,
      idShift: this.cfg.idShift,
      idCount: this.cfg.idCount,
    };
  }

  draftRecipeImage(
    imageId: string,
    recipe: ImageRecipe,
    progress: (message: string) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    return draftRecipeImage(this.recipeContext, imageId, recipe, progress, signal);
  }

  imageFromCheckpoint(imageId: string, unitId: string, cpId: string): Promise<void> {
    return imageFromCheckpoint(this.recipeContext, imageId, unitId, cpId);
  }

  sealRecipeImage(imageId: string, recipe: ImageRecipe): Promise<{ config: ImageConfig; bytes: number }> {
    return sealRecipeImage(this.recipeContext, imageId, recipe);
  }

  async baseImage(): Promise<{ bytes: number; builtAt: string }> {
    try {
      const m = JSON.parse(await readFile(`${this.cfg.imagePath}.json`, "utf8")) as {
        bytes?: number;
        builtAt?: string;
      };
      return { bytes: m.bytes ?? 0, builtAt: m.builtAt ?? new Date(0).toISOString() };
    } catch {
      return { bytes: 0, builtAt: new Date(0).toISOString() };
    }
  }

  async deleteImage(imageId: string): Promise<void> {
    await removeImported(this.paths, imageId);
  }

  async recover(
    known: (unitId: string) => Promise<ReadonlySet<string> | undefined>,
  ): Promise<{ unitId: string; checkpoint: string; image?: { id: string; version: string } }[]> {
    return recoverDisks(this.paths, known);
  }

  async close(): Promise<void> {
    // Running units outlive the server (docs/ARCHITECTURE.md section 8): only ums's own helper process stops.
    this.closing = true;
    await this.sweeping;
    // Received checkpoints being written out keep their marks until they are.
    await Promise.allSettled([...this.settling]);
    this.egress.close();
    this.weights.stop();
    // The units' parent cgroups go if no unit is left in them (rmdir fails on the others).
    await removeCgroups(this.cfg.rid);
  }
}
