import { run } from "../exec/host-command.js";

/**
 * ums's own nftables table (one per server, named after its runtime id; no other rule is ever
 * touched). Until egress policy exists, a unit may answer connections the host opens to it and
 * nothing else: no packet from a unit reaches a host service, and nothing is forwarded.
 */
export function firewallTable(rid: string): string {
  return `ums_${rid}`;
}

export async function installFirewall(rid: string): Promise<void> {
  const table = firewallTable(rid);
  const units = `u${rid}*`;
  const ruleset = `
table inet ${table}
delete table inet ${table}
table inet ${table} {
  chain input {
    type filter hook input priority filter - 10; policy accept;
    iifname "${units}" ct state established,related accept
    iifname "${units}" drop
  }
  chain forward {
    type filter hook forward priority filter - 10; policy accept;
    iifname "${units}" drop
    oifname "${units}" drop
  }
}
`;
  await run("nft", ["-f", "-"], { input: ruleset });
}

/**
 * Issue #7: units may open TCP connections to the connector gateway's port on the host (the only
 * host service they reach). Inserted at the head of the input chain, before the drop.
 */
export async function allowGatewayPort(rid: string, port: number): Promise<void> {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`gateway port ${port} is not a port`);
  const rule = ["iifname", `u${rid}*`, "tcp", "dport", String(port), "accept"];
  await run("nft", ["insert", "rule", "inet", firewallTable(rid), "input", ...rule]);
}

export async function removeFirewall(rid: string): Promise<void> {
  await run("nft", ["delete", "table", "inet", firewallTable(rid)]).catch(() => {});
}
