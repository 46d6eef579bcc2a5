import type { UnitRuntime } from "../../runtime/runtime.js";

const plain = (ip: string | undefined) => (ip ?? "").replace(/^::ffff:/i, "");

/**
 * Which unit a gateway request comes from (issue #7): its source address must be the address of a
 * unit this server runs (unspoofable: the firewall drops a unit's packets that carry any other
 * source, runtime/network/firewall.ts), and it must arrive at that unit's own gateway address
 * (the host end of its veth /30).
 */
export class GatewayUnitAddressBook {
  constructor(private readonly runtime: Pick<UnitRuntime, "unitOfAddress" | "link"> | undefined) {}

  unitIdByAddress(remoteIp: string | undefined, localIp: string | undefined): string | undefined {
    const ip = plain(remoteIp);
    const unitId = ip && this.runtime ? this.runtime.unitOfAddress(ip) : undefined;
    if (!unitId) return undefined;
    return this.runtime?.link(unitId)?.hostIp === plain(localIp) ? unitId : undefined;
  }
}
