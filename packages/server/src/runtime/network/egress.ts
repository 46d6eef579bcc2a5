import { writeFile } from "node:fs/promises";
import { isIPv4 } from "node:net";
import { run } from "../exec/host-command.js";
import { firewallTable } from "./firewall.js";
import type { NftShell } from "./nft-shell.js";
import type { UnitNetwork } from "./unit-network.js";

/** An address a unit may reach, for `timeoutS` seconds (its DNS answer's TTL plus a grace). */
export interface AllowedAddress {
  readonly ip: string;
  readonly timeoutS: number;
}

export interface EgressMode {
  /** Enforced: only the allow set; open: the public internet (spec 2.10 `{"rules": []}`). */
  readonly enforced: boolean;
  /** Whether the firewall limits egress to configured ranges (its `public4` set). */
  readonly limited: boolean;
}

const names = (slot: number) => ({
  chain: `unit_${slot}`,
  set: `allow_${slot}`,
  counter: `drop_${slot}`,
  dropped: `dropped_${slot}`,
});

/** The last hour's dropped destinations of a unit (at most 256), each with its packets and last drop. */
const DROPPED_TIMEOUT_S = 3600;

/** Never hand nft anything but a dotted quad: nft resolves what it cannot parse as a host name. */
function elements(allow: readonly AllowedAddress[]): string {
  return allow
    .filter((a) => isIPv4(a.ip))
    .map((a) => `${a.ip} timeout ${Math.max(1, Math.ceil(a.timeoutS))}s`)
    .join(", ");
}

function chainRules(table: string, slot: number, mode: EgressMode): string[] {
  const { chain, set, counter, dropped } = names(slot);
  const rule = (r: string) => `add rule inet ${table} ${chain} ${r}`;
  const note = `update @${dropped} { ip daddr } counter name ${counter}`;
  return [
    `flush chain inet ${table} ${chain}`,
    rule(`ip daddr @private4 ${note} drop`),
    ...(mode.limited ? [rule(`ip daddr != @public4 ${note} drop`)] : []),
    ...(mode.enforced
      ? [
          rule(`ip daddr @${set} accept`),
          // A reset, not silence: a denied connection fails at once instead of timing out, and a
          // connection cut by a policy change ends at the unit's next packet.
          rule(`meta l4proto tcp ${note} reject with tcp reset`),
          rule(`${note} reject with icmp type admin-prohibited`),
        ]
      : [rule("accept")]),
  ];
}

/**
 * Gives a unit its egress chain, allow set and drop counter, in the given mode, then lets its
 * veth forward. The rules are in place before forwarding is on (and an interface without a chain
 * matches the firewall's final drop).
 */
export async function attachEgress(rid: string, net: UnitNetwork, mode: EgressMode): Promise<void> {
  await attachEgressRules(rid, net, mode);
  await enableForwarding(net);
}

/**
 * The egress chain, allow set and drop counter alone. They name the unit's interface and address
 * as values, so they may be made while (or before) its link is: a boot does both at once.
 */
export async function attachEgressRules(rid: string, net: UnitNetwork, mode: EgressMode): Promise<void> {
  const table = firewallTable(rid);
  const { chain, set, counter, dropped } = names(net.slot);
  const batch = [
    // A fresh counter (one of a crashed run may be there): its rules go first, then it.
    `add chain inet ${table} ${chain}`,
    `flush chain inet ${table} ${chain}`,
    `add counter inet ${table} ${counter}`,
    `delete counter inet ${table} ${counter}`,
    `add counter inet ${table} ${counter}`,
    `add set inet ${table} ${set} { type ipv4_addr; flags timeout; }`,
    `flush set inet ${table} ${set}`,
    `add set inet ${table} ${dropped} { type ipv4_addr; size 256; flags dynamic,timeout; timeout ${DROPPED_TIMEOUT_S}s; counter; }`,
    `flush set inet ${table} ${dropped}`,
    ...chainRules(table, net.slot, mode),
    `add element inet ${table} sources { "${net.hostIf}" . ${net.unitIp} }`,
    `add element inet ${table} gateways { "${net.hostIf}" . ${net.hostIp} }`,
    `add element inet ${table} egress { "${net.hostIf}" : jump ${chain} }`,
  ];
  await run("nft", ["-f", "-"], { input: batch.join("\n") });
}

/**
 * Lets a unit's veth forward, once its egress chain is in place (attachEgressRules) and its link
 * exists. Per interface (ip-sysctl.rst, conf/<if>/forwarding): packets arriving from this unit may
 * be routed; the host's global ip_forward is left alone. No IPv6 on the host end of the link.
 */
export async function enableForwarding(net: UnitNetwork): Promise<void> {
  await writeFile(`/proc/sys/net/ipv4/conf/${net.hostIf}/forwarding`, "1");
  await writeFile(`/proc/sys/net/ipv6/conf/${net.hostIf}/disable_ipv6`, "1").catch(() => {});
}

/** Switches the mode and replaces the allow set in one transaction (nft applies a batch atomically). */
export async function setEgress(
  rid: string,
  net: UnitNetwork,
  mode: EgressMode,
  allow: readonly AllowedAddress[],
): Promise<void> {
  const table = firewallTable(rid);
  const { set } = names(net.slot);
  const els = elements(allow);
  const batch = [
    `flush set inet ${table} ${set}`,
    ...(els ? [`add element inet ${table} ${set} { ${els} }`] : []),
    ...chainRules(table, net.slot, mode),
  ];
  await run("nft", ["-f", "-"], { input: batch.join("\n") });
}

/** Adds (or extends) allowed addresses; an element already there gets the new timeout. One nft line. */
export async function allowEgress(
  shell: NftShell,
  rid: string,
  slot: number,
  allow: readonly AllowedAddress[],
): Promise<void> {
  const els = elements(allow);
  if (!els) return;
  const table = firewallTable(rid);
  const { set } = names(slot);
  // `add` keeps an existing element's timeout; delete-then-add in one batch refreshes it.
  const add = `add element inet ${table} ${set} { ${els} }`;
  await shell.run(`${add}; delete element inet ${table} ${set} { ${els.replace(/ timeout \d+s/g, "")} }; ${add}`);
}

export async function detachEgress(rid: string, net: UnitNetwork): Promise<void> {
  const table = firewallTable(rid);
  const { chain, set, counter, dropped } = names(net.slot);
  const steps = [
    `delete element inet ${table} egress { "${net.hostIf}" }`,
    `delete element inet ${table} sources { "${net.hostIf}" . ${net.unitIp} }`,
    `delete element inet ${table} gateways { "${net.hostIf}" . ${net.hostIp} }`,
    `delete chain inet ${table} ${chain}`,
    `delete set inet ${table} ${set}`,
    `delete set inet ${table} ${dropped}`,
    `delete counter inet ${table} ${counter}`,
  ];
  // One batch; when part is already gone (a crash halfway), each step on its own.
  await run("nft", ["-f", "-"], { input: steps.join("\n") }).catch(async () => {
    for (const s of steps) await run("nft", ["-f", "-"], { input: s }).catch(() => {});
  });
}

export interface EgressDrops {
  /** Packets the unit's chain dropped or rejected since it was attached. */
  readonly packets: number;
  /** Destinations dropped within the last hour, the most recent first. */
  readonly destinations: readonly { address: string; packets: number; lastDropMs: number }[];
}

interface NftJson {
  nftables: {
    counter?: { packets: number };
    set?: { elem?: { elem?: { val: string; expires?: number; counter?: { packets: number } } }[] };
  }[];
}

export async function egressDrops(rid: string, slot: number): Promise<EgressDrops> {
  const { counter, dropped } = names(slot);
  const table = firewallTable(rid);
  const now = Date.now();
  const [c, s] = await Promise.all([
    run("nft", ["-j", "list", "counter", "inet", table, counter]),
    run("nft", ["-j", "list", "set", "inet", table, dropped]),
  ]);
  const packets = (JSON.parse(c.stdout) as NftJson).nftables.find((e) => e.counter)?.counter?.packets ?? 0;
  const elems = (JSON.parse(s.stdout) as NftJson).nftables.find((e) => e.set)?.set?.elem ?? [];
  // Each drop refreshes the element's timeout, so it was last dropped (timeout - expires) ago.
  const destinations = elems
    .flatMap((e) => (e.elem ? [e.elem] : []))
    .map((e) => ({
      address: e.val,
      packets: e.counter?.packets ?? 0,
      lastDropMs: now - (DROPPED_TIMEOUT_S - (e.expires ?? DROPPED_TIMEOUT_S)) * 1000,
    }))
    .sort((a, b) => b.lastDropMs - a.lastDropMs);
  return { packets, destinations };
}
