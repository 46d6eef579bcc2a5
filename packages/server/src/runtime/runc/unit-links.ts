import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { settled } from "../../util/settled.js";
import type { Subnet } from "../network/addresses.js";
import {
  addUnitNetns,
  linkUnitNetns,
  tearDownUnitNetwork,
  type UnitNetwork,
  unitNetworkOf,
} from "../network/unit-network.js";
import type { UnitLink } from "../runtime.js";
import type { EgressState } from "./egress-state.js";
import { SlotAllocator } from "./slots.js";
import type { UnitPaths } from "./unit-paths.js";

/**
 * Running units' links: an address slot of the unit subnet each, its namespace and veth pair
 * (network/unit-network.ts) and its egress chain. Each is recorded in the unit's run dir
 * (`network.json`) so that a restarted server finds the links of the units that kept running.
 */
export class UnitLinks {
  private readonly networks = new Map<string, UnitNetwork>();
  /** Namespaces made for a boot whose link is not made yet (prepare, then attach). */
  private readonly prepared = new Map<string, UnitNetwork>();
  private readonly slots: SlotAllocator;

  constructor(
    private readonly rid: string,
    private readonly subnet: Subnet,
    private readonly paths: UnitPaths,
    private readonly egress: EgressState,
  ) {
    this.slots = new SlotAllocator(subnet);
  }

  private file(id: string): string {
    return join(this.paths.unit(id).run, "network.json");
  }

  get(id: string): UnitNetwork | undefined {
    return this.networks.get(id);
  }

  link(id: string): UnitLink | undefined {
    const net = this.networks.get(id);
    return net && { hostIp: net.hostIp, unitIp: net.unitIp };
  }

  unitOfAddress(ip: string): string | undefined {
    // A dual-stack listener reports IPv4 peers as IPv4-mapped IPv6 addresses.
    const v4 = ip.startsWith("::ffff:") ? ip.slice(7) : ip;
    for (const [id, net] of this.networks) if (net.unitIp === v4) return id;
    return undefined;
  }

  /**
   * The unit's network namespace, made if it has none, and what its link will be: what runc needs
   * to start the unit. `attach` links it (in the meantime the unit has only its loopback).
   */
  async prepare(id: string): Promise<UnitNetwork> {
    const existing = this.networks.get(id) ?? this.prepared.get(id);
    if (existing) return existing;
    const slot = this.slots.take(id);
    const net = unitNetworkOf(this.rid, this.subnet, slot);
    try {
      await addUnitNetns(net);
    } catch (err) {
      this.slots.release(id);
      throw err;
    }
    this.prepared.set(id, net);
    return net;
  }

  /**
   * The unit's link for its boot, made if it has none; `policy` is its network policy (spec 2.10)
   * as JSON. A link kept through the stop before (`RuncRuntime.stop`'s keepLink) gets the rules a
   * new one gets: this policy's mode, nothing allowed yet.
   */
  async attach(id: string, policy: string): Promise<UnitNetwork> {
    const enforced = ((JSON.parse(policy) as { rules?: unknown[] }).rules ?? []).length > 0;
    const existing = this.networks.get(id);
    if (existing) {
      this.egress.forget(id);
      await this.egress.reset(existing, enforced);
      this.egress.markFresh(id, enforced);
      return existing;
    }
    const net = await this.prepare(id);
    try {
      // The policy holds from the unit's first packet: its rules are in place before forwarding is
      // on. The link (ip) and the rules (nft) are made at once: the rules name the interface by
      // its name, and an interface without rules matches the firewall's final drop.
      const [link, rules] = await Promise.allSettled([linkUnitNetns(net), this.egress.attachRules(net, enforced)]);
      try {
        if (link.status === "rejected") throw link.reason;
        if (rules.status === "rejected") throw rules.reason;
        await this.egress.forward(net);
      } catch (err) {
        await this.egress.detach(net).catch(() => {});
        await tearDownUnitNetwork(this.rid, net.slot);
        throw err;
      }
      await writeFile(this.file(id), JSON.stringify(net));
      this.networks.set(id, net);
      this.egress.markFresh(id, enforced);
      return net;
    } catch (err) {
      this.slots.release(id);
      throw err;
    } finally {
      this.prepared.delete(id);
    }
  }

  async detach(id: string): Promise<void> {
    const net = this.networks.get(id);
    const slot = net?.slot ?? this.slots.slotOf(id);
    this.prepared.delete(id);
    if (slot === undefined) return;
    // The unit's rules and its link go at once: without the link no packet reaches the rules, and
    // the slot is taken again only once both are gone.
    await settled([net ? this.egress.detach(net) : Promise.resolve(), tearDownUnitNetwork(this.rid, slot)]);
    await rm(this.file(id), { force: true });
    this.networks.delete(id);
    this.egress.forget(id);
    this.slots.release(id);
  }

  /** After a restart, running units keep their links: read them back; the others' are torn down. */
  async recover(running: ReadonlyMap<string, unknown>): Promise<void> {
    let ids: string[] = [];
    try {
      ids = await readdir(this.paths.runRoot);
    } catch {}
    for (const id of ids) {
      let net: UnitNetwork;
      try {
        net = JSON.parse(await readFile(this.file(id), "utf8"));
      } catch {
        continue;
      }
      if (running.has(id)) {
        this.slots.claim(id, net.slot);
        this.networks.set(id, net);
        // The firewall was installed anew: closed (enforced, nothing allowed) until the server
        // re-applies the unit's policy when it re-adopts the unit.
        await this.egress.attach(net, true);
      } else {
        await tearDownUnitNetwork(this.rid, net.slot);
        await rm(this.file(id), { force: true });
      }
    }
  }
}
