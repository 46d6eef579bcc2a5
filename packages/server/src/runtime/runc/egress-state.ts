import {
  type AllowedAddress,
  allowEgress,
  attachEgress,
  attachEgressRules,
  detachEgress,
  type EgressMode,
  egressDrops,
  enableForwarding,
  setEgress,
} from "../network/egress.js";
import { firewallTable } from "../network/firewall.js";
import { NftShell } from "../network/nft-shell.js";
import type { UnitNetwork } from "../network/unit-network.js";
import type { EgressDrops } from "../runtime.js";

/**
 * The units' egress rules (network/egress.ts) and what the runtime remembers about them: which
 * units still have the mode they booted with and an empty allow set (so putting that policy in
 * force costs no second nft run), and the one long-lived nft the resolver's additions go through.
 */
export class EgressState {
  /** The resolver's allow-set additions go through one long-lived nft (see nft-shell.ts). */
  private readonly nft = new NftShell();
  /** Units whose egress chain was attached in this mode with an empty allow set, untouched since. */
  private readonly fresh = new Map<string, boolean>();

  constructor(
    private readonly rid: string,
    /** Whether the firewall limits egress to configured ranges (`egressRanges`). */
    private readonly limited: boolean,
  ) {}

  /** Starts the resolver's nft now, not at the first lookup (a line must add something: a probe element). */
  async start(): Promise<void> {
    await this.nft.run(`add element inet ${firewallTable(this.rid)} probe { 0 timeout 1s }`);
  }

  close(): void {
    this.nft.close();
  }

  private mode(enforced: boolean): EgressMode {
    return { enforced, limited: this.limited };
  }

  /** Gives a unit's link its egress chain with an empty allow set, before the unit's first packet. */
  async attach(net: UnitNetwork, enforced: boolean): Promise<void> {
    await attachEgress(this.rid, net, this.mode(enforced));
  }

  /** `attach` in two steps, the first while the link is made (a boot): the rules ... */
  async attachRules(net: UnitNetwork, enforced: boolean): Promise<void> {
    await attachEgressRules(this.rid, net, this.mode(enforced));
  }

  /** ... then, once both the rules and the link are there, forwarding. */
  async forward(net: UnitNetwork): Promise<void> {
    await enableForwarding(net);
  }

  /** A kept link's chain back to how `attach` leaves a new one: mode `enforced`, an empty allow set. */
  async reset(net: UnitNetwork, enforced: boolean): Promise<void> {
    await setEgress(this.rid, net, this.mode(enforced), []);
  }

  /** The unit's chain has the mode `enforced` and an empty allow set, as attached. */
  markFresh(unitId: string, enforced: boolean): void {
    this.fresh.set(unitId, enforced);
  }

  async detach(net: UnitNetwork): Promise<void> {
    await detachEgress(this.rid, net);
  }

  forget(unitId: string): void {
    this.fresh.delete(unitId);
  }

  async set(
    unitId: string,
    net: UnitNetwork | undefined,
    enforced: boolean,
    allow: readonly AllowedAddress[],
  ): Promise<void> {
    if (!net) return;
    // A unit just booted already has this mode and an empty allow set (UnitLinks.attach): the
    // policy put in force as it starts running costs no second nft run.
    if (allow.length === 0 && this.fresh.get(unitId) === enforced) return;
    this.fresh.delete(unitId);
    await setEgress(this.rid, net, this.mode(enforced), allow);
  }

  async allow(unitId: string, net: UnitNetwork | undefined, allow: readonly AllowedAddress[]): Promise<void> {
    this.fresh.delete(unitId);
    if (net) await allowEgress(this.nft, this.rid, net.slot, allow);
  }

  async drops(net: UnitNetwork | undefined): Promise<EgressDrops | undefined> {
    return net ? egressDrops(this.rid, net.slot).catch(() => undefined) : undefined;
  }
}
