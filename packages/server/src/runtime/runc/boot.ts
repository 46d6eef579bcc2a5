import { existsSync } from "node:fs";
import { mkdir, open, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ImageConfig } from "@ums/protocol";
import { waitForAgent } from "../../agent/health.js";
import { settled } from "../../util/settled.js";
import type { BootSpec, RuntimeState } from "../runtime.js";
import { withAgentListener } from "./agent-listener.js";
import { protectAgent } from "./agent-protection.js";
import { attachWarmer } from "./attach-warmer.js";
import type { RuncRuntimeConfig } from "./config.js";
import { ALLOWED_DEVICES, buildOciSpec, UNIT_PATHS } from "./oci-spec.js";
import { policyDir, prepareRunDir, publishDiskGroup, publishNetworkPolicy, writeResolvConf } from "./run-dir.js";
import type { Gate, Runc } from "./runc.js";
import type { UnitLinks } from "./unit-links.js";
import type { UnitPaths } from "./unit-paths.js";
import type { UnitResources } from "./unit-resources.js";

/** What booting a unit needs of the runtime. */
export interface BootContext {
  readonly cfg: RuncRuntimeConfig;
  readonly paths: UnitPaths;
  readonly runc: Runc;
  readonly links: UnitLinks;
  readonly resources: UnitResources;
  /** The unit's quota group in sysfs (`df` in the unit reads it); undefined while quotas are off. */
  diskGroup(): string | undefined;
  state(id: string): Promise<RuntimeState>;
  /** Gives the unit's disk its size (and its first boot its quota group), while the rest is prepared. */
  limitDisk(): Promise<unknown>;
  /** Undoes a boot that failed halfway. */
  stop(id: string): Promise<void>;
}

/** Issue #18: an organization image's config, as the agent reads it (agent/src/config.ts). */
export function imageAgentEnv(config: ImageConfig): Record<string, string> {
  return {
    UMS_AGENT_UID: String(config.user.uid),
    UMS_AGENT_GID: String(config.user.gid),
    UMS_AGENT_USER: config.user.name,
    UMS_AGENT_HOME: config.user.home,
    UMS_AGENT_ENV: JSON.stringify(config.env),
    ...(config.working_dir !== null && { UMS_AGENT_WORKDIR: config.working_dir }),
  };
}

/**
 * Boots a stopped unit that has its disk: its run dir, link and policy files, then the container
 * (an OCI bundle for runc, the agent's listening socket handed to PID 1 as fd 3); returns once the
 * agent answers. A failure after the container's pieces were set up stops the unit again.
 */
export async function bootUnit(ctx: BootContext, spec: BootSpec): Promise<void> {
  // Until `runc run` has returned: its cgroup attach then skips a wait (attach-warmer.ts).
  const warmed = attachWarmer.hold();
  try {
    await bootContainer(ctx, spec, warmed);
  } finally {
    warmed();
  }
}

async function bootContainer(ctx: BootContext, spec: BootSpec, warmed: () => void): Promise<void> {
  const { cfg, paths } = ctx;
  const id = spec.unitId;
  const unit = paths.unit(id);
  const runDir = unit.run;
  await prepareRunDir(paths, id);
  const view = paths.checkpointView(id);
  // Set up while the container starts: the unit's link (ip, nft) and its disk's size (btrfs). The
  // unit has only its loopback until the link is made (its packets are dropped until its nft chain
  // is in place), and its agent starts the unit's services only when the start gate opens, once both
  // are done (see below).
  let setup: Promise<unknown> | undefined;
  try {
    // What the container needs first is made at once; all of it has settled before a failure
    // stops the unit again.
    const [net] = await settled([
      ctx.links.prepare(id),
      view.prepareMounts(),
      publishNetworkPolicy(paths, id, spec.network),
    ]);
    const setUp = () => {
      setup = settled([
        ctx.links.attach(id, spec.network),
        ctx.limitDisk().then(() => publishDiskGroup(paths, id, ctx.diskGroup())),
      ]);
      // Awaited below (or in the catch); this only keeps a failure before then from counting as unhandled.
      setup.catch(() => {});
    };
    const resolvConf = await writeResolvConf(paths, id, net.hostIp);
    const ociSpec = buildOciSpec({
      hostname: spec.name,
      rootfs: unit.rootfs,
      idShift: cfg.idShift,
      idCount: cfg.idCount,
      netnsPath: net.netnsPath,
      cgroupsPath: unit.cgroup,
      hostPaths: {
        ...cfg.hostPaths,
        nodePty: cfg.hostPaths.nodePty,
        run: unit.exposed,
        checkpoints: view.dir,
        resolvConf,
        policy: policyDir(paths, id),
      },
      env: {
        UMS_UNIT_NAME: spec.name,
        UMS_UNIT_URL: spec.url,
        UMS_AGENT_LISTEN_FD: "3",
        UMS_AGENT_GATE_FD: "4",
        UMS_INTERNAL_API_SOCKET: UNIT_PATHS.apiSocket,
        UMS_HOST_SOCKET: UNIT_PATHS.hostSocket,
        HOME: "/root",
        ...(spec.image && imageAgentEnv(spec.image.config)),
      },
      memoryLimitBytes: ctx.resources.memoryBytes(spec.resources),
      pidsLimit: ctx.resources.pids(spec.resources),
      cpu: ctx.resources.cpu(spec.resources),
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
    const pidFile = join(runDir, "init.pid");
    const logPath = join(runDir, "agent.log");
    const log = await open(logPath, "a");
    let gate: Gate | undefined;
    try {
      gate = await withAgentListener(unit.agentSocket, (fd) => {
        // runc's process is started first: it is the longer way, and a process start holds this
        // thread for milliseconds (ip, nft and btrfs are started right after it).
        const started = ctx.runc.start(id, bundle, { fd: log.fd, path: logPath }, pidFile, [fd], { gate: true });
        started.finally(warmed).catch(() => {}); // its failure is the boot's, awaited below
        setUp();
        return started;
      });
    } finally {
      await log.close();
    }
    // While the agent starts: the checkpoints are shown (binds that propagate into the running
    // unit), the link and disk limit are finished, then the gate opens (closed, whatever came of
    // them: a failure stops the unit below); once the agent answers, it is protected.
    const opened = (setup ?? Promise.resolve()).finally(() => gate?.open());
    await settled([
      view.refresh(),
      opened,
      waitForAgent(unit.agentSocket, cfg.bootTimeoutMs, async () => (await ctx.state(id)) === "running").then(() =>
        protectAgent(pidFile),
      ),
    ]);
  } catch (err) {
    // Nothing may still be under way when the unit is stopped (its link would outlive the stop).
    await setup?.catch(() => {});
    await ctx.stop(id).catch(() => {});
    throw err;
  }
}
