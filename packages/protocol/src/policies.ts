import { type Static, Type } from "@sinclair/typebox";

/**
 * Resources policy (spec 4.5 leaves the shape open; this is ours): cgroup limits of the unit.
 * Applied at once to a running unit where the kernel allows, otherwise at its next boot. A POST
 * changes the limits it names and keeps the others; DELETE reverts all of them to the server's
 * defaults. A limit not set is the server's default (`ums serve --unit-pids`, `--unit-cpu`).
 */
export const ResourcesPolicy = Type.Object(
  {
    memory: Type.Optional(
      Type.Object(
        {
          limit_mb: Type.Integer({ minimum: 32, maximum: 1048576, description: "Memory limit in MiB (RAM, no swap)" }),
        },
        { additionalProperties: false },
      ),
    ),
    pids: Type.Optional(
      Type.Object(
        { limit: Type.Integer({ minimum: 16, maximum: 1048576, description: "Most processes and threads at once" }) },
        { additionalProperties: false },
      ),
    ),
    disk: Type.Optional(
      Type.Object(
        {
          limit_mb: Type.Integer({
            minimum: 128,
            maximum: 16777216,
            description:
              "Disk size in MiB: what the unit may write on top of its image, as stored (compressed), what its checkpoints keep included; a write beyond it fails with EDQUOT",
          }),
        },
        { additionalProperties: false },
      ),
    ),
    cpu: Type.Optional(
      Type.Object(
        {
          cores: Type.Number({
            exclusiveMinimum: 0,
            maximum: 1024,
            description:
              "CPU time the unit may use, in cores (CFS quota per period): 0.5 is half of one core, 2 two cores; at most what units may use on the host",
          }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false, title: "ResourcesPolicy" },
);
export type ResourcesPolicy = Static<typeof ResourcesPolicy>;

export const DEVICE_NAMES = ["fuse", "tun", "kvm"] as const;

/**
 * Privileges policy (ours): `profile` picks the capabilities of root inside the unit (all of them
 * confined to the unit's user namespace), `devices` adds host devices from a short allowlist,
 * `no_new_privileges` stops setuid programs (sudo) from gaining privileges. Applies at next boot.
 */
export const PrivilegesPolicy = Type.Object(
  {
    profile: Type.Optional(
      Type.Union([Type.Literal("minimal"), Type.Literal("standard"), Type.Literal("privileged")], {
        description:
          "minimal: the OCI default capabilities; standard (default): those of a usual container root; privileged: adds SYS_ADMIN, NET_ADMIN, SYS_PTRACE and more, within the unit's namespaces",
      }),
    ),
    devices: Type.Optional(
      Type.Array(Type.Union(DEVICE_NAMES.map((d) => Type.Literal(d))), {
        maxItems: DEVICE_NAMES.length,
        uniqueItems: true,
        description: "Host devices to expose: fuse (/dev/fuse), tun (/dev/net/tun), kvm (/dev/kvm)",
      }),
    ),
    no_new_privileges: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, title: "PrivilegesPolicy" },
);
export type PrivilegesPolicy = Static<typeof PrivilegesPolicy>;
