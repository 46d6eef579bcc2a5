/**
 * Privilege profiles (spec 4.5 leaves the shape open; ours is documented in the OpenAPI).
 * Capabilities are those of the unit's own user namespace: even `privileged` root in a unit is an
 * unprivileged uid on the host.
 */
export type PrivilegeProfile = "minimal" | "standard" | "privileged";

/**
 * The OCI default set (`runc spec`), plus SETUID and SETGID, without which the agent (the unit's
 * root) could not start sessions as the unit's user.
 */
const MINIMAL = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SETUID", "CAP_SETGID"];

/** What a developer expects of root on a small machine (the set container engines give by default). */
const STANDARD = [
  ...MINIMAL,
  "CAP_CHOWN",
  "CAP_DAC_OVERRIDE",
  "CAP_FOWNER",
  "CAP_FSETID",
  "CAP_MKNOD",
  "CAP_NET_RAW",
  "CAP_SETGID",
  "CAP_SETUID",
  "CAP_SETFCAP",
  "CAP_SETPCAP",
  "CAP_SYS_CHROOT",
];

const PRIVILEGED = [
  ...STANDARD,
  "CAP_DAC_READ_SEARCH",
  "CAP_IPC_LOCK",
  "CAP_IPC_OWNER",
  "CAP_LEASE",
  "CAP_LINUX_IMMUTABLE",
  "CAP_NET_ADMIN",
  "CAP_NET_BROADCAST",
  "CAP_SYS_ADMIN",
  "CAP_SYS_NICE",
  "CAP_SYS_PTRACE",
  "CAP_SYS_RESOURCE",
];

export function capabilitiesFor(profile: PrivilegeProfile): readonly string[] {
  return profile === "minimal" ? MINIMAL : profile === "standard" ? STANDARD : PRIVILEGED;
}
