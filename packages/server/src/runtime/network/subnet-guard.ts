import { run } from "../exec/host-command.js";
import { type Subnet, subnetCidr } from "./addresses.js";

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
