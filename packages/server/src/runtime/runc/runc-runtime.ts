import { existsSync } from "node:fs";
import { chmod, mkdir, open, readdir, readFile, rename, rm, rmdir, stat, writeFile } from "node:fs/promises";
import { availableParallelism, setPriority } from "node:os";
import { dirname, join, resolve } from "node:path";
import { waitForAgent } from "../../agent/health.js";
import { failpoint } from "../../failpoints/failpoints.js";
import { run } from "../exec/host-command.js";
import { type Subnet, subnetCidr } from "../network/addresses.js";
import {
  type AllowedAddress,
  allowEgress,
  attachEgress,
  detachEgress,
  egressDrops,
  setEgress,
} from "../network/egress.js";
import { allowGatewayPort, firewallTable, installFirewall } from "../network/firewall.js";
import { NftShell } from "../network/nft-shell.js";
import { setUpUnitNetwork, tearDownUnitNetwork, type UnitNetwork } from "../network/unit-network.js";
import { enableUplinks } from "../network/uplinks.js";
import type {
  BootSpec,
  EgressDrops,
  ResourceLimits,
  ResourcesPolicy,
  RuntimeState,
  UnitLink,
  UnitRuntime,
  UnitStats,
} from "../runtime.js";
import { deleteSubvolume, snapshot } from "../storage/btrfs.js";
import { withAgentListener } from "./agent-listener.js";
import { CheckpointView } from "./checkpoint-view.js";
import { cfsQuota, configureUnitsCpu, unitsCpuBudget } from "./cpu-share.js";
import { CpuWeights } from "./cpu-weights.js";
import { ALLOWED_DEVICES, buildOciSpec, UNIT_PATHS } from "./oci-spec.js";
import { Runc } from "./runc.js";
import { SlotAllocator } from "./slots.js";

export interface RuncRuntimeConfig {
  readonly dataDir: string;
  /** The mounted btrfs pool. */
  readonly poolDir: string;
  /** The read-only base image subvolume units are snapshots of. */
  readonly imagePath: string;
  /** A few hex characters that name this server's host resources (netns, veth, nft table, cgroups). */
  readonly rid: string;
  readonly subnet: Subnet;
  readonly hostPaths: {
    readonly node: string;
    readonly init: string;
    readonly agentDir: string;
    readonly nodePty?: string;
  };
  /** Host id that is root inside units; `idCount` ids are mapped (the image is shifted the same way). */
  readonly idShift: number;
  readonly idCount: number;
  readonly defaultMemoryBytes: number;
  readonly defaultPids: number;
  /** CPU time a unit may use where its policy names none, in cores (a CFS quota). */
  readonly defaultCpuCores: number;
  /** The host's cores (default: those this process may run on); units share all but half of one. */
  readonly hostCores?: number | undefined;
  readonly bootTimeoutMs: number;
  /** The connectors gateway's port on the host: units may reach it at their gateway address. */
  readonly gatewayPort: number;
  /** When set, units reach only these public ranges (tests confine them to their fake internet). */
  readonly egressRanges?: readonly string[] | undefined;
  /** Interfaces replies to units arrive on; ums turns forwarding on for them if it is off. */
  readonly uplinks?: readonly string[] | undefined;
}

const CGROUP_ROOT = "/sys/fs/cgroup";

/** cgroup v1 freezer (kernel docs, cgroup-v1/freezer-subsystem): false when the file is missing. */
async function setFrozen(cgroupsPath: string, frozen: boolean): Promise<boolean> {
  const file = join(CGROUP_ROOT, "freezer", cgroupsPath, "freezer.state");
  if (!existsSync(file)) return false;
  await writeFile(file, frozen ? "FROZEN" : "THAWED");
  if (!frozen) return true;
  // FREEZING until every task has stopped; give up (and thaw) if it does not settle.
  for (let i = 0; i < 400; i++) {
    if ((await readFile(file, "utf8")).trim() === "FROZEN") return true;
    await new Promise((r) => setTimeout(r, 5));
  }
  await writeFile(file, "THAWED");
  throw new Error(`could not freeze ${cgroupsPath}: tasks did not stop within 2 s`);
}

/**
 * SIGKILLs every task of a unit's cgroup and waits until none is left. Frozen first (a paused
 * unit already is): a frozen task cannot fork, so one pass over cgroup.procs reaches every task of
 * even a fork bomb; the kills are pending until the thaw, when all die at once. Without the
 * freezer (or if it cannot settle, a task stuck in the kernel) it kills in passes until none is left.
 * The unit's CPU quota goes first: freezing and dying take each task some CPU time, which a
 * storm's throttled cgroup would hand out over seconds.
 */
async function killCgroup(cgroupsPath: string): Promise<void> {
  const procsFile = join(CGROUP_ROOT, "pids", cgroupsPath, "cgroup.procs");
  if (!existsSync(procsFile)) return;
  // -1: no quota of its own; the units' parent cgroup still caps it (cpu-share.ts).
  await writeFile(join(CGROUP_ROOT, "cpu", cgroupsPath, "cpu.cfs_quota_us"), "-1").catch(() => {});
  const frozen = await setFrozen(cgroupsPath, true).catch(() => false);
  const tasks = async () => (await readFile(procsFile, "utf8").catch(() => "")).split("\n").filter(Boolean).map(Number);
  const killAll = (pids: number[]) => {
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  };
  if (frozen) {
    killAll(await tasks());
    await setFrozen(cgroupsPath, false).catch(() => {});
  }
  for (let i = 0; i < 1000; i++) {
    const pids = await tasks();
    if (pids.length === 0) return;
    killAll(pids);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** The agent's nice value: it weighs ~87x a nice-0 task (each step ~1.25x; sched(7)). */
const AGENT_NICE = -20;

/**
 * The agent keeps answering while its unit is busy: a fork bomb fills the unit's cgroup with a
 * thousand runnable tasks, which at equal weights leave the agent a thousandth of the unit's CPU.
 * Its main thread runs at a higher priority, and with SCHED_RESET_ON_FORK (sched(7)) whatever it
 * starts begins at nice 0 again. A nice value weighs only within the unit's own cgroup, never
 * against other units or the host. Best effort, like the OOM score: it needs CAP_SYS_NICE.
 */
async function prioritizeAgent(pid: number): Promise<void> {
  if (!(pid > 1)) return;
  try {
    await run("chrt", ["--other", "--reset-on-fork", "--pid", "0", String(pid)]);
    setPriority(pid, AGENT_NICE);
  } catch {}
}

/**
 * Packets for a unit address whose unit is gone (its /30 route left with its veth) must not follow
 * the default route off this host: the whole unit subnet is unreachable except through a unit's
 * own, more specific route (ip-route(8), route type `unreachable`).
 */
export async function guardSubnet(subnet: Subnet): Promise<void> {
  await run("ip", ["route", "replace", "unreachable", subnetCidr(subnet)]);
}

export async function unguardSubnet(subnet: Subnet): Promise<void> {
  await run("ip", ["route", "del", "unreachable", subnetCidr(subnet)]).catch(() => {});
}

/** Removes this runtime's (empty) parent cgroups; runc removes each unit's own on delete. */
export async function removeCgroups(rid: string): Promise<void> {
  let controllers: string[] = [];
  try {
    controllers = await readdir(CGROUP_ROOT);
  } catch {}
  for (const c of controllers) await rmdir(join(CGROUP_ROOT, c, `ums-${rid}`)).catch(() => {});
}

async function allowTraversal(dir: string): Promise<void> {
  for (let d = resolve(dir); ; d = dirname(d)) {
    const st = await stat(d);
    if ((st.mode & 0o001) === 0) await chmod(d, (st.mode & 0o7777) | 0o001);
    if (d === dirname(d)) break;
  }
}

/** Units as runc containers on btrfs snapshots (DESIGN.md sections 2 and 4). */
export class RuncRuntime implements UnitRuntime {
  private readonly runc: Runc;
  private readonly slots: SlotAllocator;
  private readonly networks = new Map<string, UnitNetwork>();
  /** The resolver's allow-set additions go through one long-lived nft (see nft-shell.ts). */
  private readonly nft = new NftShell();
  /** Units whose egress chain was attached in this mode with an empty allow set, untouched since. */
  private readonly freshEgress = new Map<string, boolean>();

  /** The mounted pool units live on. */
  get poolDir(): string {
    return this.cfg.poolDir;
  }

  private readonly hostCores: number;
  /** Units pressing against their limits weigh less than the others while they do. */
  private readonly weights: CpuWeights;

  private constructor(private readonly cfg: RuncRuntimeConfig) {
    this.runc = new Runc(join(cfg.dataDir, "runc"));
    this.slots = new SlotAllocator(cfg.subnet);
    this.hostCores = cfg.hostCores ?? availableParallelism();
    this.weights = new CpuWeights(CGROUP_ROOT, cfg.rid);
  }

  static async open(cfg: RuncRuntimeConfig): Promise<RuncRuntime> {
    const rt = new RuncRuntime(Object.freeze({ ...cfg }));
    const budget = unitsCpuBudget(rt.hostCores);
    if (!(cfg.defaultCpuCores > 0 && cfg.defaultCpuCores <= budget)) {
      throw new Error(
        `a unit's default CPU limit of ${cfg.defaultCpuCores} cores is more than units may use on this host (${budget} of its ${rt.hostCores} cores); pass a smaller --unit-cpu`,
      );
    }
    // Units are created below /ums-<rid>: its CPU share and total quota are in place first.
    await configureUnitsCpu(CGROUP_ROOT, cfg.rid, rt.hostCores);
    await mkdir(join(cfg.poolDir, "units"), { recursive: true });
    await mkdir(join(cfg.dataDir, "run"), { recursive: true });
    // runc mounts a unit's rootfs and binds from inside its user namespace, as the unit's root
    // (an unprivileged host uid): every directory above them must let it pass (o+x, not o+r).
    await allowTraversal(join(cfg.poolDir, "units"));
    await allowTraversal(join(cfg.dataDir, "run"));
    await installFirewall(cfg.rid, {
      subnet: subnetCidr(cfg.subnet),
      gatewayPort: cfg.gatewayPort,
      egressRanges: cfg.egressRanges,
    });
    await guardSubnet(cfg.subnet);
    await enableUplinks(cfg.rid, cfg.dataDir, cfg.uplinks ?? []);
    // Start the resolver's nft now, not at the first lookup (a line must add something: a probe element).
    await rt.nft.run(`add element inet ${firewallTable(cfg.rid)} probe { 0 timeout 1s }`);
    await rt.stopOldLayoutUnits();
    await rt.recoverNetworks();
    rt.weights.start();
    return rt;
  }

  private unitDir(id: string) {
    return join(this.cfg.poolDir, "units", id);
  }
  private rootfs(id: string) {
    return join(this.unitDir(id), "rootfs");
  }
  private runDir(id: string) {
    return join(this.cfg.dataDir, "run", id);
  }
  private checkpointView(id: string) {
    return new CheckpointView(join(this.runDir(id), "checkpoints"), join(this.unitDir(id), "checkpoints"));
  }

  private cgroupsPath(id: string) {
    return `/ums-${this.cfg.rid}/${id}`;
  }

  /** Host-owned, never visible in the unit: the host binds it and hands the unit the descriptor. */
  agentSocket(id: string): string {
    return join(this.runDir(id), "agent.sock");
  }

  /** In the host-owned directory the unit sees read-only at /.unit/run. */
  hostSocket(id: string): { path: string; uid: number } {
    return { path: join(this.exposedDir(id), "host.sock"), uid: this.cfg.idShift };
  }

  /** What the unit sees at /.unit/run: owned by host root, bound read-only (see oci-spec.ts). */
  private exposedDir(id: string) {
    return join(this.runDir(id), "exposed");
  }

  async allowGatewayPort(port: number): Promise<void> {
    // A configured port is in the firewall since installFirewall; an ephemeral one is added now.
    if (port !== this.cfg.gatewayPort) await allowGatewayPort(this.cfg.rid, port);
  }

  address(id: string): string | undefined {
    return this.networks.get(id)?.unitIp;
  }

  link(id: string): UnitLink | undefined {
    const net = this.networks.get(id);
    return net && { hostIp: net.hostIp, unitIp: net.unitIp };
  }

  unitOfAddress(ip: string): string | undefined {
    // A dual-stack listener reports IPv4 peers as IPv4-mapped IPv6 addresses.
    const v4 = ip.startsWith("::ffff:") ? ip.slice(7) : ip;
    for (const [id, net] of this.networks) if (net.unitIp === v4) return id;
    return undefined;
  }

  private egressMode(enforced: boolean) {
    return { enforced, limited: this.cfg.egressRanges !== undefined };
  }

  async setEgress(id: string, enforced: boolean, allow: readonly AllowedAddress[]): Promise<void> {
    const net = this.networks.get(id);
    if (!net) return;
    // A unit just booted already has this mode and an empty allow set (attachNetwork): the policy
    // put in force as it starts running costs no second nft run.
    if (allow.length === 0 && this.freshEgress.get(id) === enforced) return;
    this.freshEgress.delete(id);
    await setEgress(this.cfg.rid, net, this.egressMode(enforced), allow);
  }

  async allowEgress(id: string, allow: readonly AllowedAddress[]): Promise<void> {
    const net = this.networks.get(id);
    this.freshEgress.delete(id);
    if (net) await allowEgress(this.nft, this.cfg.rid, net.slot, allow);
  }

  async egressDrops(id: string): Promise<EgressDrops | undefined> {
    const net = this.networks.get(id);
    return net ? egressDrops(this.cfg.rid, net.slot).catch(() => undefined) : undefined;
  }

  /** Written beside the files the unit sees, then renamed in: a reader never sees half a file. */
  async publishNetworkPolicy(id: string, json: string): Promise<void> {
    const dir = join(this.runDir(id), "policy");
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await writeFile(join(dir, ".network.json.tmp"), `${json}\n`, { mode: 0o644 });
    await rename(join(dir, ".network.json.tmp"), join(dir, "network.json"));
  }

  /** Idempotent: a unit that has its disk keeps it. */
  async create(id: string): Promise<void> {
    if (existsSync(this.rootfs(id))) return;
    await mkdir(this.unitDir(id), { recursive: true });
    await snapshot(this.cfg.imagePath, this.rootfs(id), { readonly: false });
  }

  async boot(spec: BootSpec): Promise<void> {
    const id = spec.unitId;
    const state = await this.state(id);
    if (state === "running") return;
    if (state === "paused") return this.resume(id);
    await this.runc.delete(id); // a stopped leftover
    await this.create(id); // a unit whose disk was not made yet (e.g. a crash right after create)
    const runDir = this.runDir(id);
    await mkdir(runDir, { recursive: true, mode: 0o711 });
    // Before 0.2 the unit's root owned <run>/sock (its sockets' dir). No process of the unit runs
    // now (it is stopped), so nothing can race this removal.
    await rm(join(runDir, "sock"), { recursive: true, force: true });
    const exposed = this.exposedDir(id);
    await mkdir(exposed, { recursive: true, mode: 0o755 });
    await chmod(exposed, 0o755);
    await rm(this.agentSocket(id), { force: true });

    const net = await this.attachNetwork(id, spec.network);
    await this.publishNetworkPolicy(id, spec.network);
    const resolvConf = join(runDir, "resolv.conf");
    await writeFile(resolvConf, `# ums: the unit's resolver (its network policy applies)\nnameserver ${net.hostIp}\n`, {
      mode: 0o644,
    });
    const view = this.checkpointView(id);
    try {
      await view.prepare();
      const ociSpec = buildOciSpec({
        hostname: spec.name,
        rootfs: this.rootfs(id),
        idShift: this.cfg.idShift,
        idCount: this.cfg.idCount,
        netnsPath: net.netnsPath,
        cgroupsPath: this.cgroupsPath(id),
        hostPaths: {
          ...this.cfg.hostPaths,
          nodePty: this.cfg.hostPaths.nodePty,
          run: exposed,
          checkpoints: view.dir,
          resolvConf,
          policy: join(runDir, "policy"),
        },
        env: {
          UMS_UNIT_NAME: spec.name,
          UMS_UNIT_URL: spec.url,
          UMS_AGENT_LISTEN_FD: "3",
          UMS_INTERNAL_API_SOCKET: UNIT_PATHS.apiSocket,
          UMS_HOST_SOCKET: UNIT_PATHS.hostSocket,
          HOME: "/root",
        },
        memoryLimitBytes: spec.resources.memory
          ? spec.resources.memory.limit_mb * 1024 * 1024
          : this.cfg.defaultMemoryBytes,
        pidsLimit: spec.resources.pids?.limit ?? this.cfg.defaultPids,
        cpu: cfsQuota(this.cpuCores(spec.resources)),
        privileges: {
          profile: spec.privileges.profile ?? "standard",
          noNewPrivileges: spec.privileges.no_new_privileges ?? false,
          // Devices the host lacks are left out rather than failing the boot.
          devices: (spec.privileges.devices ?? []).flatMap((d) => {
            const rule = ALLOWED_DEVICES[d];
            return rule && existsSync(rule.path) ? [rule] : [];
          }),
        },
      });
      const bundle = join(runDir, "bundle");
      await mkdir(bundle, { recursive: true });
      await writeFile(join(bundle, "config.json"), JSON.stringify(ociSpec));
      const log = await open(join(runDir, "agent.log"), "a");
      try {
        await withAgentListener(this.agentSocket(id), (fd) =>
          this.runc.start(id, bundle, log.fd, join(runDir, "init.pid"), [fd]),
        );
      } finally {
        await log.close();
      }
      await waitForAgent(
        this.agentSocket(id),
        this.cfg.bootTimeoutMs,
        async () => (await this.state(id)) === "running",
      );
      await this.protectAgent(id);
    } catch (err) {
      await this.stop(id).catch(() => {});
      throw err;
    }
  }

  /**
   * When a unit runs out of memory the kernel must kill one of its processes, never PID 1 or the
   * agent. Only the host may lower a score (a user namespace cannot): best effort, since a host
   * without CAP_SYS_RESOURCE (some sandboxes) cannot either; the agent also raises the score of
   * every process it starts to the maximum.
   */
  private async protectAgent(id: string): Promise<void> {
    const pid1 = Number((await readFile(join(this.runDir(id), "init.pid"), "utf8").catch(() => "")).trim());
    if (!pid1) return;
    const children = (await readFile(`/proc/${pid1}/task/${pid1}/children`, "utf8").catch(() => ""))
      .trim()
      .split(/\s+/);
    for (const pid of [String(pid1), ...children].filter(Boolean)) {
      await writeFile(`/proc/${pid}/oom_score_adj`, "-999").catch(() => {});
    }
    for (const pid of children.filter(Boolean)) await prioritizeAgent(Number(pid));
  }

  private async attachNetwork(id: string, policy: string): Promise<UnitNetwork> {
    const existing = this.networks.get(id);
    if (existing) return existing;
    const slot = this.slots.take(id);
    try {
      const net = await setUpUnitNetwork(this.cfg.rid, this.cfg.subnet, slot);
      // The policy holds from the unit's first packet: its rules are in place before it boots.
      const enforced = ((JSON.parse(policy) as { rules?: unknown[] }).rules ?? []).length > 0;
      await attachEgress(this.cfg.rid, net, this.egressMode(enforced)).catch(async (err) => {
        await detachEgress(this.cfg.rid, net);
        await tearDownUnitNetwork(this.cfg.rid, slot);
        throw err;
      });
      await writeFile(join(this.runDir(id), "network.json"), JSON.stringify(net));
      this.networks.set(id, net);
      this.freshEgress.set(id, enforced);
      return net;
    } catch (err) {
      this.slots.release(id);
      throw err;
    }
  }

  private async detachNetwork(id: string): Promise<void> {
    const net = this.networks.get(id);
    const slot = net?.slot ?? this.slots.slotOf(id);
    if (slot === undefined) return;
    if (net) await detachEgress(this.cfg.rid, net);
    await tearDownUnitNetwork(this.cfg.rid, slot);
    await rm(join(this.runDir(id), "network.json"), { force: true });
    this.networks.delete(id);
    this.freshEgress.delete(id);
    this.slots.release(id);
  }

  /**
   * Units booted by a ums before the host made the agent's socket (their agent listens in a
   * directory the unit can write, which the host no longer connects into) are stopped: their next
   * use boots them with the host-owned layout.
   */
  private async stopOldLayoutUnits(): Promise<void> {
    for (const id of (await this.running()).keys()) {
      if (existsSync(this.agentSocket(id))) continue;
      await killCgroup(this.cgroupsPath(id));
      await this.runc.delete(id);
    }
  }

  /** After a restart, running units keep their networks: read them back. */
  private async recoverNetworks(): Promise<void> {
    const running = await this.running();
    let ids: string[] = [];
    try {
      ids = await readdir(join(this.cfg.dataDir, "run"));
    } catch {}
    for (const id of ids) {
      let net: UnitNetwork;
      try {
        net = JSON.parse(await readFile(join(this.runDir(id), "network.json"), "utf8"));
      } catch {
        continue;
      }
      if (running.has(id)) {
        this.slots.claim(id, net.slot);
        this.networks.set(id, net);
        // The firewall was installed anew: closed (enforced, nothing allowed) until the server
        // re-applies the unit's policy when it re-adopts the unit.
        await attachEgress(this.cfg.rid, net, this.egressMode(true));
      } else {
        await tearDownUnitNetwork(this.cfg.rid, net.slot);
        await rm(join(this.runDir(id), "network.json"), { force: true });
      }
    }
  }

  /**
   * Pause and resume write the unit's freezer cgroup directly (what `runc pause/resume` do, minus
   * a process spawn of ~8 ms each way); runc reads the freezer to report the state, so `runc list`
   * stays right. Hosts without the v1 freezer fall back to runc.
   */
  async pause(id: string): Promise<void> {
    if (!(await setFrozen(this.cgroupsPath(id), true))) await this.runc.pause(id);
  }

  async resume(id: string): Promise<void> {
    if (!(await setFrozen(this.cgroupsPath(id), false))) await this.runc.resume(id);
  }

  async stop(id: string): Promise<void> {
    // `runc delete --force` sleeps 100 ms before it looks again; killing the cgroup's tasks here
    // first makes the delete immediate.
    try {
      await killCgroup(this.cgroupsPath(id));
      await this.runc.delete(id);
    } finally {
      await this.checkpointView(id).teardown();
      await this.detachNetwork(id);
    }
  }

  async destroy(id: string): Promise<void> {
    await this.stop(id);
    const dir = this.unitDir(id);
    let cps: string[] = [];
    try {
      cps = await readdir(join(dir, "checkpoints"));
    } catch {}
    for (const sub of [...cps.map((cp) => join("checkpoints", cp)), "rootfs", "rootfs.old", "rootfs.new"]) {
      if (existsSync(join(dir, sub))) await deleteSubvolume(join(dir, sub));
    }
    await rm(this.unitDir(id), { recursive: true, force: true });
    await rm(this.runDir(id), { recursive: true, force: true });
  }

  async state(id: string): Promise<RuntimeState> {
    const s = await this.runc.state(id);
    if (!s) return "stopped";
    return s.status === "running" ? "running" : s.status === "paused" ? "paused" : "stopped";
  }

  async isAlive(id: string): Promise<boolean> {
    try {
      const procs = await readFile(join(CGROUP_ROOT, "pids", this.cgroupsPath(id), "cgroup.procs"), "utf8");
      return procs.trim() !== "";
    } catch {
      // No v1 pids cgroup to read: ask runc.
      return (await this.state(id)) !== "stopped";
    }
  }

  async running(): Promise<Map<string, RuntimeState>> {
    const out = new Map<string, RuntimeState>();
    for (const c of await this.runc.list()) {
      if (c.status === "running" || c.status === "paused") out.set(c.id, c.status);
    }
    return out;
  }

  async stats(id: string): Promise<UnitStats | undefined> {
    const cg = this.cgroupsPath(id);
    try {
      const [cpu, memStat] = await Promise.all([
        readFile(join(CGROUP_ROOT, "cpuacct", cg, "cpuacct.usage"), "utf8"),
        readFile(join(CGROUP_ROOT, "memory", cg, "memory.stat"), "utf8"),
      ]);
      const rss = /^total_rss (\d+)$/m.exec(memStat)?.[1] ?? /^rss (\d+)$/m.exec(memStat)?.[1] ?? "0";
      return { cpuNs: Number(cpu.trim()), rssBytes: Number(rss) };
    } catch {
      return undefined;
    }
  }

  resourceLimits(): ResourceLimits {
    return {
      defaults: {
        memory: { limit_mb: Math.round(this.cfg.defaultMemoryBytes / (1024 * 1024)) },
        pids: { limit: this.cfg.defaultPids },
        cpu: { cores: this.cfg.defaultCpuCores },
      },
      maxCpuCores: unitsCpuBudget(this.hostCores),
    };
  }

  /** A policy above what units may use now (fewer cores than when it was set) gets all of it. */
  private cpuCores(r: ResourcesPolicy): number {
    return Math.min(r.cpu?.cores ?? this.cfg.defaultCpuCores, unitsCpuBudget(this.hostCores));
  }

  async applyResources(id: string, r: ResourcesPolicy): Promise<boolean> {
    if ((await this.state(id)) === "stopped") return false;
    const mem = r.memory ? r.memory.limit_mb * 1024 * 1024 : this.cfg.defaultMemoryBytes;
    const pids = r.pids?.limit ?? this.cfg.defaultPids;
    const cpu = cfsQuota(this.cpuCores(r));
    try {
      await run("runc", [
        "--root",
        join(this.cfg.dataDir, "runc"),
        "update",
        "--memory",
        String(mem),
        "--memory-swap",
        String(mem),
        "--pids-limit",
        String(pids),
        "--cpu-period",
        String(cpu.period),
        "--cpu-quota",
        String(cpu.quota),
        id,
      ]);
      return true;
    } catch {
      // Lowering a memory limit below current use is refused by the kernel: it applies at next boot.
      return false;
    }
  }

  private checkpointPath(id: string, cpId: string) {
    return join(this.unitDir(id), "checkpoints", cpId);
  }

  async checkpoint(id: string, cpId: string): Promise<{ frozenMs: number }> {
    await this.create(id);
    await mkdir(join(this.unitDir(id), "checkpoints"), { recursive: true });
    const dst = this.checkpointPath(id, cpId);
    const running = (await this.state(id)) === "running";
    const started = performance.now();
    // Freeze (a no-op for a paused or stopped unit) so that no process moves on while the snapshot
    // is taken. A btrfs snapshot is atomic either way (crash-consistent): if the freeze cannot
    // settle (a task stuck in the kernel), the snapshot is taken unfrozen rather than failing.
    let frozen = running;
    if (running) {
      try {
        if (!(await setFrozen(this.cgroupsPath(id), true))) await this.runc.pause(id);
      } catch {
        frozen = false;
      }
    }
    let frozenMs = 0;
    try {
      if (frozen) failpoint("checkpoint.frozen");
      await snapshot(this.rootfs(id), dst, { readonly: true });
    } finally {
      if (frozen && !(await setFrozen(this.cgroupsPath(id), false))) await this.runc.resume(id);
      frozenMs = frozen ? performance.now() - started : 0;
    }
    await this.checkpointView(id).refresh();
    return { frozenMs };
  }

  hasCheckpoint(id: string, cpId: string): boolean {
    return existsSync(this.checkpointPath(id, cpId));
  }

  /**
   * The journal makes a restore all-or-nothing: written first (phase `replacing`); then rootfs →
   * rootfs.old (rename), a writable snapshot of the checkpoint as rootfs.new → rootfs (rename),
   * and only then the journal's phase becomes `replaced` (an atomic rename). `completeRestore`
   * deletes rootfs.old and the journal. `recover` rolls back any restore still `replacing` and
   * rolls forward one that is `replaced`.
   */
  async restoreDisk(id: string, cpId: string): Promise<void> {
    if ((await this.state(id)) !== "stopped") throw new Error("restoreDisk needs a stopped unit");
    const src = this.checkpointPath(id, cpId);
    if (!existsSync(src)) throw new Error(`checkpoint ${cpId} has no snapshot`);
    const dir = this.unitDir(id);
    await writeJournal(dir, { checkpoint: cpId, phase: "replacing" });
    failpoint("restore.journaled");
    if (existsSync(join(dir, "rootfs.new"))) await deleteSubvolume(join(dir, "rootfs.new"));
    if (existsSync(this.rootfs(id))) await rename(this.rootfs(id), join(dir, "rootfs.old"));
    failpoint("restore.old-moved");
    await snapshot(src, join(dir, "rootfs.new"), { readonly: false });
    failpoint("restore.new-snapshotted");
    await rename(join(dir, "rootfs.new"), this.rootfs(id));
    failpoint("restore.new-moved");
    await writeJournal(dir, { checkpoint: cpId, phase: "replaced" });
  }

  async completeRestore(id: string): Promise<void> {
    const dir = this.unitDir(id);
    if (existsSync(join(dir, "rootfs.old"))) await deleteSubvolume(join(dir, "rootfs.old"));
    await rm(join(dir, "restore.json"), { force: true });
  }

  async deleteCheckpoint(id: string, cpId: string): Promise<void> {
    const path = this.checkpointPath(id, cpId);
    // Unbind it from the unit's view first: a mounted snapshot cannot be deleted.
    await this.checkpointView(id).hide(cpId);
    failpoint("delete.hidden");
    if (existsSync(path)) await deleteSubvolume(path);
    await this.checkpointView(id).refresh();
  }

  async forkDisk(srcId: string, cpId: string, newId: string): Promise<void> {
    await mkdir(this.unitDir(newId), { recursive: true });
    await snapshot(this.checkpointPath(srcId, cpId), this.rootfs(newId), { readonly: false });
  }

  async recover(
    known: (unitId: string) => Promise<ReadonlySet<string> | undefined>,
  ): Promise<{ unitId: string; checkpoint: string }[]> {
    const forward: { unitId: string; checkpoint: string }[] = [];
    let ids: string[] = [];
    try {
      ids = await readdir(join(this.cfg.poolDir, "units"));
    } catch {}
    for (const id of ids) {
      const dir = this.unitDir(id);
      const journal = join(dir, "restore.json");
      const hasCheckpoints = existsSync(join(dir, "checkpoints"));
      if (!hasCheckpoints && !existsSync(journal)) continue;
      const wanted = await known(id);
      if (!wanted) continue; // another server's unit on a shared pool
      if (existsSync(journal)) {
        const entry = await readJournal(dir);
        if (entry?.phase === "replaced") {
          forward.push({ unitId: id, checkpoint: entry.checkpoint });
        } else {
          // Still replacing: whatever is at rootfs while rootfs.old exists is the new copy.
          if (existsSync(join(dir, "rootfs.new"))) await deleteSubvolume(join(dir, "rootfs.new"));
          if (existsSync(join(dir, "rootfs.old"))) {
            if (existsSync(this.rootfs(id))) await deleteSubvolume(this.rootfs(id));
            await rename(join(dir, "rootfs.old"), this.rootfs(id));
          }
          await rm(journal, { force: true });
        }
      }
      await rm(`${journal}.tmp`, { force: true });
      let cps: string[] = [];
      try {
        cps = await readdir(join(dir, "checkpoints"));
      } catch {}
      for (const cp of cps) {
        if (wanted.has(cp)) continue;
        // A crash after the snapshot was shown in the unit's view leaves it bound there.
        await this.checkpointView(id).hide(cp);
        await deleteSubvolume(join(dir, "checkpoints", cp));
      }
    }
    return forward;
  }

  async close(): Promise<void> {
    // Running units outlive the server (DESIGN.md section 3): only ums's own helper process stops.
    this.nft.close();
    this.weights.stop();
    // The units' parent cgroups go if no unit is left in them (rmdir fails on the others).
    await removeCgroups(this.cfg.rid);
  }
}

interface RestoreJournal {
  readonly checkpoint: string;
  readonly phase: "replacing" | "replaced";
}

/** Replaces the journal atomically (written aside, synced, renamed over). */
async function writeJournal(dir: string, entry: RestoreJournal): Promise<void> {
  const tmp = join(dir, "restore.json.tmp");
  const fh = await open(tmp, "w");
  try {
    await fh.writeFile(JSON.stringify(entry));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, join(dir, "restore.json"));
}

/** Undefined when the journal is unreadable (torn write of the first phase): roll back. */
async function readJournal(dir: string): Promise<RestoreJournal | undefined> {
  try {
    const entry = JSON.parse(await readFile(join(dir, "restore.json"), "utf8")) as Partial<RestoreJournal>;
    if (typeof entry.checkpoint !== "string") return undefined;
    return { checkpoint: entry.checkpoint, phase: entry.phase === "replaced" ? "replaced" : "replacing" };
  } catch {
    return undefined;
  }
}
