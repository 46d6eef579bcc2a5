import type { Subnet } from "../network/addresses.js";

/** How units reach the network beyond the host: what `ums serve` configures and the runtime enforces. */
export interface UnitEgressOptions {
  /** The connectors gateway's port on the host: units may reach it at their gateway address. */
  readonly gatewayPort: number;
  /** When set, units reach only these public ranges (tests confine them to their fake internet). */
  readonly egressRanges?: readonly string[] | undefined;
  /** Interfaces replies to units arrive on; ums turns forwarding on for them if it is off. */
  readonly uplinks?: readonly string[] | undefined;
}

export interface RuncRuntimeConfig extends UnitEgressOptions {
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
    /** The agent build's ld.so.preload naming its statfs library (`df` shows the unit's disk); absent when not built. */
    readonly preload?: string;
  };
  /** Host id that is root inside units; `idCount` ids are mapped (the image is shifted the same way). */
  readonly idShift: number;
  readonly idCount: number;
  readonly defaultMemoryBytes: number;
  readonly defaultPids: number;
  /** CPU time a unit may use where its policy names none, in cores (a CFS quota). */
  readonly defaultCpuCores: number;
  /** What a unit may write where its policy names none, in bytes (its btrfs quota group's limit, unit-disk.ts). */
  readonly defaultDiskBytes: number;
  /** The host's cores (default: those this process may run on); units share all but half of one. */
  readonly hostCores?: number | undefined;
  readonly bootTimeoutMs: number;
}
