import { capabilitiesFor, type PrivilegeProfile } from "./profiles.js";
import { seccompProfile } from "./seccomp.js";

/**
 * Where the host's pieces appear inside a unit.
 *
 * The boundary rule (docs/SECURITY.md): nothing a unit can write is ever followed, opened, chowned or
 * connected to by path from the host. So every source below is a host-owned file or directory that
 * the unit's root (an unmapped-from-host uid) cannot change, bound read-only; the agent's socket is
 * not here at all (the host binds it outside the unit and passes the descriptor, agent-listener.ts);
 * and the host writes nothing into the rootfs (the agent writes /etc/hostname and /etc/hosts).
 */
export const UNIT_PATHS = Object.freeze({
  dir: "/.unit",
  bin: "/.unit/bin",
  node: "/.unit/bin/node",
  init: "/.unit/bin/catatonit",
  agentDir: "/.unit/agent",
  agent: "/.unit/agent/agent.cjs",
  // Found by node's lookup from /.unit/agent/agent-bundle.cjs (…/agent/node_modules, then /.unit/node_modules).
  nodePty: "/.unit/node_modules/node-pty",
  /** A host-owned directory, read-only: holds the host's end of the internal API. */
  run: "/.unit/run",
  /** ums's end of the internal API (made by the host in the directory bound at /.unit/run). */
  hostSocket: "/.unit/run/host.sock",
  /** The internal API for processes in the unit (spec 4.7), served by the agent. */
  apiSocket: "/.unit/api.sock",
  checkpoints: "/.unit/checkpoints",
  /** The unit's policies as it may read them (issue #6: network.json), kept current by the host. */
  policy: "/.unit/policy",
});

export interface DeviceRule {
  readonly path: string;
  /** `c` (character) or `b` (block) */
  readonly type: "c" | "b";
  readonly major: number;
  readonly minor: number;
}

/** The host devices a privileges policy may expose (its `devices` names). */
export const ALLOWED_DEVICES: Readonly<Record<string, DeviceRule>> = Object.freeze({
  fuse: { path: "/dev/fuse", type: "c", major: 10, minor: 229 },
  tun: { path: "/dev/net/tun", type: "c", major: 10, minor: 200 },
  kvm: { path: "/dev/kvm", type: "c", major: 10, minor: 232 },
});

export interface OciSpecInput {
  readonly hostname: string;
  readonly rootfs: string;
  /** Host uid/gid that is root inside the unit, and how many ids are mapped. */
  readonly idShift: number;
  readonly idCount: number;
  readonly netnsPath: string;
  readonly cgroupsPath: string;
  readonly hostPaths: {
    readonly node: string;
    readonly init: string;
    readonly agentDir: string;
    readonly nodePty: string | undefined;
    /** A host-owned dir bound read-only at /.unit/run (it holds the internal API's host socket). */
    readonly run: string;
    /** The shared mount holding read-only binds of the unit's recent checkpoints. */
    readonly checkpoints: string;
    /** A resolv.conf naming the unit's gateway as its resolver, bound read-only over /etc/resolv.conf. */
    readonly resolvConf?: string | undefined;
    /** A host dir with the unit's policy files, bound read-only at /.unit/policy. */
    readonly policy?: string | undefined;
    /** An ld.so.preload naming the agent's statfs library, bound read-only over /etc/ld.so.preload. */
    readonly preload?: string | undefined;
  };
  readonly env: Readonly<Record<string, string>>;
  readonly memoryLimitBytes: number | undefined;
  readonly pidsLimit: number;
  /** CFS bandwidth: `quota` µs of CPU time per `period` µs (quota / period cores). */
  readonly cpu: { readonly quota: number; readonly period: number };
  readonly privileges: {
    readonly profile: PrivilegeProfile;
    readonly noNewPrivileges: boolean;
    readonly devices: readonly DeviceRule[];
  };
}

const ro = (source: string, destination: string) => ({
  destination,
  type: "bind",
  source,
  options: ["bind", "ro", "nosuid", "nodev"],
});

/**
 * The OCI runtime config of a unit (OCI runtime spec 1.0.2, config.md and config-linux.md):
 * pid, mount, uts, ipc and a user namespace of its own; the network namespace ums prepared;
 * catatonit as PID 1 with the agent as its child; the default masked and read-only paths.
 */
export function buildOciSpec(i: OciSpecInput): Record<string, unknown> {
  const caps = [...capabilitiesFor(i.privileges.profile)];
  return {
    ociVersion: "1.0.2",
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: [UNIT_PATHS.init, "--", UNIT_PATHS.node, UNIT_PATHS.agent],
      env: Object.entries({ PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", ...i.env }).map(
        ([k, v]) => `${k}=${v}`,
      ),
      cwd: "/",
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      noNewPrivileges: i.privileges.noNewPrivileges,
    },
    root: { path: i.rootfs, readonly: false },
    hostname: i.hostname,
    mounts: [
      { destination: "/proc", type: "proc", source: "proc" },
      {
        destination: "/dev",
        type: "tmpfs",
        source: "tmpfs",
        options: ["nosuid", "strictatime", "mode=755", "size=65536k"],
      },
      {
        destination: "/dev/pts",
        type: "devpts",
        source: "devpts",
        options: ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
      },
      {
        destination: "/dev/shm",
        type: "tmpfs",
        source: "shm",
        options: ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
      },
      { destination: "/dev/mqueue", type: "mqueue", source: "mqueue", options: ["nosuid", "noexec", "nodev"] },
      // sysfs cannot be mounted anew in a user namespace that does not own the network namespace
      // (which ums owns, so unit root cannot reconfigure it): bind the host's, read-only.
      { destination: "/sys", type: "none", source: "/sys", options: ["rbind", "nosuid", "noexec", "nodev", "ro"] },
      { destination: "/run", type: "tmpfs", source: "tmpfs", options: ["nosuid", "nodev", "mode=755"] },
      {
        destination: UNIT_PATHS.dir,
        type: "tmpfs",
        source: "tmpfs",
        options: ["nosuid", "nodev", "mode=755", "size=1m"],
      },
      ro(i.hostPaths.node, UNIT_PATHS.node),
      ro(i.hostPaths.init, UNIT_PATHS.init),
      ro(i.hostPaths.agentDir, UNIT_PATHS.agentDir),
      ...(i.hostPaths.nodePty ? [ro(i.hostPaths.nodePty, UNIT_PATHS.nodePty)] : []),
      // A directory bind: the host's socket made in it later (host-sockets.ts) appears in the unit.
      { ...ro(i.hostPaths.run, UNIT_PATHS.run), options: ["bind", "ro", "nosuid", "nodev", "noexec"] },
      // rslave: checkpoints the host binds here later appear in the unit too.
      {
        destination: UNIT_PATHS.checkpoints,
        type: "bind",
        source: i.hostPaths.checkpoints,
        options: ["rbind", "ro", "nosuid", "nodev", "rslave"],
      },
      // A directory bind: the host replaces the files in it (rename) and the unit sees the new ones.
      ...(i.hostPaths.policy
        ? [{ ...ro(i.hostPaths.policy, UNIT_PATHS.policy), options: ["bind", "ro", "nosuid", "nodev", "noexec"] }]
        : []),
      ...(i.hostPaths.resolvConf ? [ro(i.hostPaths.resolvConf, "/etc/resolv.conf")] : []),
      // Every glibc process of the unit loads the statfs library: `df` shows the unit's disk size
      // (agent/src/native/statfs-quota.c; it reads the quota group the host names in /.unit/policy/disk).
      ...(i.hostPaths.preload ? [ro(i.hostPaths.preload, "/etc/ld.so.preload")] : []),
    ],
    linux: {
      devices: i.privileges.devices.map((d) => ({
        path: d.path,
        type: d.type,
        major: d.major,
        minor: d.minor,
        fileMode: 0o666,
        uid: 0,
        gid: 0,
      })),
      uidMappings: [{ containerID: 0, hostID: i.idShift, size: i.idCount }],
      gidMappings: [{ containerID: 0, hostID: i.idShift, size: i.idCount }],
      namespaces: [
        { type: "pid" },
        { type: "ipc" },
        { type: "uts" },
        { type: "mount" },
        { type: "user" },
        { type: "network", path: i.netnsPath },
      ],
      cgroupsPath: i.cgroupsPath,
      resources: {
        devices: [
          { allow: false, access: "rwm" },
          ...i.privileges.devices.map((d) => ({
            allow: true,
            type: d.type,
            major: d.major,
            minor: d.minor,
            access: "rwm",
          })),
        ],
        ...(i.memoryLimitBytes !== undefined && {
          memory: { limit: i.memoryLimitBytes, swap: i.memoryLimitBytes },
        }),
        pids: { limit: i.pidsLimit },
        cpu: { quota: i.cpu.quota, period: i.cpu.period },
      },
      seccomp: seccompProfile({ allowPtrace: i.privileges.profile !== "minimal" }),
      maskedPaths: [
        "/proc/acpi",
        "/proc/asound",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/proc/scsi",
        "/sys/firmware",
        "/sys/fs/cgroup",
      ],
      readonlyPaths: ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
    },
  };
}
