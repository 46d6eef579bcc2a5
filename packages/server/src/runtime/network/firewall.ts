import { run } from "../exec/host-command.js";

/**
 * ums's own nftables table (one per server, named after its runtime id; no other rule is ever
 * touched). What it enforces (issue #6, docs/ARCHITECTURE.md section 7 "nftables"):
 * - prerouting (raw): a unit's packets must carry its own address (`sources`: host veth . unit
 *   address) and be IPv4; a unit-subnet source arriving on any other interface but lo is dropped.
 *   So a source address in the unit subnet names exactly one unit (see `unitOfAddress`).
 * - input: from a unit only replies, and new traffic to its own gateway address on the resolver
 *   port (udp/tcp 53) and the connectors gateway port; nothing else on the host is reachable.
 * - forward: a unit's packets never go to another unit, the private/loopback/link-local ranges or
 *   the unit subnet; the rest goes through the unit's own chain (`unit_<slot>`, see egress.ts):
 *   open (public internet) or enforced (only its allow set). Packets to units only as replies.
 *   On an uplink where ums itself turned forwarding on, only replies of masqueraded connections
 *   are forwarded, so the host does not become a router for anything else.
 * - postrouting: unit traffic leaving the host is masqueraded.
 */
export function firewallTable(rid: string): string {
  return `ums_${rid}`;
}

/** RFC 6890 special-purpose ranges a unit never reaches (the TEST-NETs are left public). */
export const PRIVATE_RANGES = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "224.0.0.0/3",
];

export interface FirewallOpts {
  /** The unit subnet (CIDR). */
  readonly subnet: string;
  /** The connectors gateway's port on the host (units reach it at their gateway address); 0: not known
   * yet (an ephemeral port, added by allowGatewayPort once the gateway listens). */
  readonly gatewayPort: number;
  /** When set, units reach only these public ranges (tests: the fake internet's). */
  readonly egressRanges?: readonly string[] | undefined;
}

export async function installFirewall(rid: string, opts: FirewallOpts): Promise<void> {
  const table = firewallTable(rid);
  const units = `u${rid}*`;
  const limit = opts.egressRanges
    ? `set public4 { type ipv4_addr; flags interval; ${opts.egressRanges.length > 0 ? `elements = { ${opts.egressRanges.join(", ")} }` : ""} }`
    : "";
  const ruleset = `
table inet ${table}
delete table inet ${table}
table inet ${table} {
  set private4 { type ipv4_addr; flags interval; elements = { ${[...PRIVATE_RANGES, opts.subnet].join(", ")} }; auto-merge; }
  ${limit}
  set sources { type ifname . ipv4_addr; }
  set gateways { type ifname . ipv4_addr; }
  set gateway_ports { type inet_service; ${opts.gatewayPort > 0 ? `elements = { ${opts.gatewayPort} }` : ""} }
  set uplinks { type ifname; }
  map egress { type ifname : verdict; }
  set probe { type inet_service; flags timeout; comment "lines that only check nft answers (nft-shell.ts)"; }
  counter spoofed {}
  counter to_host {}
  chain pre {
    type filter hook prerouting priority raw; policy accept;
    iifname "lo" accept
    iifname "${units}" goto from_unit
    ip saddr ${opts.subnet} counter name spoofed drop
  }
  chain from_unit {
    meta nfproto != ipv4 drop
    iifname . ip saddr != @sources counter name spoofed drop
  }
  chain input {
    type filter hook input priority filter - 10; policy accept;
    iifname != "${units}" return
    ct state established,related accept
    iifname . ip daddr @gateways meta l4proto { tcp, udp } th dport 53 accept
    iifname . ip daddr @gateways tcp dport @gateway_ports accept
    counter name to_host drop
  }
  chain forward {
    type filter hook forward priority filter - 10; policy accept;
    iifname "${units}" jump from_unit_fwd
    oifname "${units}" ct state established,related accept
    oifname "${units}" drop
    iifname @uplinks ct status snat accept
    iifname @uplinks drop
  }
  chain from_unit_fwd {
    oifname "${units}" drop
    iifname vmap @egress
    drop
  }
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${opts.subnet} oifname != "${units}" masquerade
  }
}
`;
  await run("nft", ["-f", "-"], { input: ruleset });
}

/**
 * Issue #7: the connectors gateway's port, once known (an ephemeral one is known only after the
 * gateway listens): units reach it at their own gateway address, as the input chain says.
 */
export async function allowGatewayPort(rid: string, port: number): Promise<void> {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`gateway port ${port} is not a port`);
  await run("nft", ["add", "element", "inet", firewallTable(rid), "gateway_ports", `{ ${port} }`]);
}

export async function removeFirewall(rid: string): Promise<void> {
  await run("nft", ["delete", "table", "inet", firewallTable(rid)]).catch(() => {});
}
