import { existsSync } from "node:fs";
import { run } from "../exec/host-command.js";
import { type Subnet, slotAddresses } from "./addresses.js";
import { linkNamespace } from "./veth.js";

export interface UnitNetwork {
  readonly slot: number;
  readonly netns: string;
  readonly netnsPath: string;
  readonly hostIf: string;
  readonly hostIp: string;
  readonly unitIp: string;
}

/** Names of a slot's host resources; `rid` (a few hex chars) keeps servers on one host apart. */
export function networkNames(rid: string, slot: number): { netns: string; hostIf: string } {
  // Interface names are at most 15 bytes (IFNAMSIZ - 1).
  return { netns: `ums${rid}-${slot}`, hostIf: `u${rid}${slot.toString(36)}` };
}

/** What a slot's link is named and addressed, before (or without) making it. */
export function unitNetworkOf(rid: string, subnet: Subnet, slot: number): UnitNetwork {
  const { netns, hostIf } = networkNames(rid, slot);
  const { hostIp, unitIp } = slotAddresses(subnet, slot);
  return { slot, netns, netnsPath: `/var/run/netns/${netns}`, hostIf, hostIp, unitIp };
}

/**
 * A unit's network is a network namespace owned by the host (so root in the unit cannot reconfigure
 * it) with a veth pair: `eth0` inside, the host end outside, a /30 between them and a default route
 * to the host. It is made in two steps: first the namespace alone, all a container needs to start
 * in it (a boot links it while the container starts). A crashed run's leftovers go first; when
 * there are none (the usual boot) the two `ip` runs that would find nothing are skipped:
 * /sys/class/net lists the host namespace's interfaces.
 */
export async function addUnitNetns(net: UnitNetwork): Promise<void> {
  if (existsSync(net.netnsPath) || existsSync(`/sys/class/net/${net.hostIf}`)) await tearDown(net.netns, net.hostIf);
  await run("ip", ["netns", "add", net.netns]);
}

/** Then the veth pair and addresses (linkNamespace); on a failure the namespace is removed too. */
export async function linkUnitNetns(net: UnitNetwork): Promise<void> {
  try {
    // The default route leads to the host, whose firewall decides what goes further (firewall.ts).
    await linkNamespace({ netns: net.netns, hostIf: net.hostIf, hostIp: net.hostIp, nsIp: net.unitIp });
  } catch (err) {
    await tearDown(net.netns, net.hostIf);
    throw err;
  }
}

export async function tearDownUnitNetwork(rid: string, slot: number): Promise<void> {
  const { netns, hostIf } = networkNames(rid, slot);
  await tearDown(netns, hostIf);
}

async function tearDown(netns: string, hostIf: string): Promise<void> {
  // Deleting either end of a veth pair deletes both; deleting the namespace deletes its end (once
  // the kernel gets to it: the host end goes first, so that its name is free at once). One ip run
  // for both; -force goes on past what is already gone (a crash halfway), which ip then reports.
  await run("ip", ["-force", "-batch", "-"], { input: `link del ${hostIf}\nnetns del ${netns}\n` }).catch(() => {});
}
