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

/**
 * A network namespace owned by the host (so root in the unit cannot reconfigure it) with a veth
 * pair: `eth0` inside, the host end outside, a /30 between them and a default route to the host.
 */
export async function setUpUnitNetwork(rid: string, subnet: Subnet, slot: number): Promise<UnitNetwork> {
  const { netns, hostIf } = networkNames(rid, slot);
  const { hostIp, unitIp } = slotAddresses(subnet, slot);
  await tearDown(netns, hostIf);
  await run("ip", ["netns", "add", netns]);
  try {
    // The default route leads to the host, whose firewall decides what goes further (firewall.ts).
    await linkNamespace({ netns, hostIf, hostIp, nsIp: unitIp });
  } catch (err) {
    await tearDown(netns, hostIf);
    throw err;
  }
  return { slot, netns, netnsPath: `/var/run/netns/${netns}`, hostIf, hostIp, unitIp };
}

export async function tearDownUnitNetwork(rid: string, slot: number): Promise<void> {
  const { netns, hostIf } = networkNames(rid, slot);
  await tearDown(netns, hostIf);
}

async function tearDown(netns: string, hostIf: string): Promise<void> {
  // Deleting either end of a veth pair deletes both; deleting the namespace deletes its end.
  await run("ip", ["link", "del", hostIf]).catch(() => {});
  await run("ip", ["netns", "del", netns]).catch(() => {});
}
