import { run } from "../exec/host-command.js";
import { parseSubnet, type Subnet, subnetCidr } from "./addresses.js";

/**
 * Issue #20 (hosts shared with other software): a unit subnet must be this server's alone. Two
 * servers on one subnet take each other's routes, and a stopped server's firewall table (kept so
 * its units survive a restart) drops as spoofed every packet from another server's units in an
 * overlapping subnet (its `pre` chain, see firewall.ts). So a server refuses to start when its
 * subnet overlaps a route on the host or another ums table, and says which.
 */

/** A route of the host's main table as `ip -4 -j route show` gives it (ip-route(8)). */
export interface HostRoute {
  readonly dst: string;
  readonly dev?: string | undefined;
  readonly type?: string | undefined;
}

/** Another ums server's firewall table (`inet ums_<rid>`) and the unit subnet it guards. */
export interface UmsTable {
  readonly rid: string;
  readonly subnet: string;
}

export interface HostNetwork {
  readonly routes: readonly HostRoute[];
  readonly tables: readonly UmsTable[];
}

function range(s: Subnet): [number, number] {
  return [s.base, s.base + 2 ** (32 - s.prefix) - 1];
}

/** Whether two IPv4 CIDRs share an address. A bare address is a /32. */
export function overlaps(a: string, b: string): boolean {
  const pa = parseCidr(a);
  const pb = parseCidr(b);
  if (!pa || !pb) return false;
  const [a0, a1] = range(pa);
  const [b0, b1] = range(pb);
  return a0 <= b1 && b0 <= a1;
}

/** Any IPv4 CIDR (parseSubnet only takes what a unit subnet may be, /8 to /28). */
function parseCidr(cidr: string): Subnet | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(cidr.trim());
  if (!m) return undefined;
  const octets = m.slice(1, 5).map(Number);
  const prefix = m[5] === undefined ? 32 : Number(m[5]);
  if (octets.some((o) => o > 255) || prefix > 32) return undefined;
  const [a = 0, b = 0, c = 0, d = 0] = octets;
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { base: ((((a << 24) | (b << 16) | (c << 8) | d) >>> 0) & mask) >>> 0, prefix };
}

/**
 * What on the host conflicts with `subnet` for the server `rid`, one sentence each (empty: none).
 * Not a conflict: the default route, this server's own units' routes (`u<rid>…` devices, kept
 * across a restart) and its own table; the `unreachable` guard route of exactly this subnet, unless
 * another server's table claims the subnet (then that table is the conflict).
 */
export function subnetConflicts(rid: string, subnet: Subnet, host: HostNetwork): string[] {
  const cidr = subnetCidr(subnet);
  const out: string[] = [];
  const others = host.tables.filter((t) => t.rid !== rid && overlaps(t.subnet, cidr));
  for (const t of others) {
    out.push(
      `the firewall table inet ums_${t.rid} of another ums server (runtime id ${t.rid}) guards ${t.subnet}, which overlaps the unit subnet ${cidr}: it drops the packets of this server's units as spoofed. If that server still runs, give this one another --unit-subnet; if it is gone for good, remove what it left with \`ums uninstall\` from its data dir, or \`nft delete table inet ums_${t.rid}\``,
    );
  }
  for (const r of host.routes) {
    if (r.dst === "default" || !overlaps(r.dst, cidr)) continue;
    if (r.dev?.startsWith(`u${rid}`)) continue;
    if (r.type === "unreachable" && r.dst === cidr && others.length === 0) continue;
    const what = [r.type && r.type !== "unicast" ? r.type : "", r.dst, r.dev ? `dev ${r.dev}` : ""]
      .filter(Boolean)
      .join(" ");
    const owner =
      /^u([0-9a-f]{4})\d+$/.exec(r.dev ?? "")?.[1] ??
      (r.type === "unreachable" ? others.find((t) => t.subnet === r.dst)?.rid : undefined);
    out.push(
      owner
        ? `the route ${what} belongs to another ums server (runtime id ${owner}) and overlaps the unit subnet ${cidr}; give this server another --unit-subnet`
        : `the route ${what} on this host overlaps the unit subnet ${cidr}; give this server a --unit-subnet no route of the host covers`,
    );
  }
  return out;
}

/** The host's routes (main table) and the ums firewall tables with their subnets. */
export async function readHostNetwork(): Promise<HostNetwork> {
  const { stdout } = await run("ip", ["-4", "-j", "route", "show"]);
  const routes = (JSON.parse(stdout || "[]") as HostRoute[]).map((r) => ({ dst: r.dst, dev: r.dev, type: r.type }));
  const tables: UmsTable[] = [];
  const { stdout: list } = await run("nft", ["list", "tables", "inet"]);
  for (const m of list.matchAll(/^table inet ums_([0-9a-z]+)$/gm)) {
    const rid = m[1] as string;
    // The masquerade rule names the table's unit subnet (firewall.ts, chain `post`).
    const chain = await run("nft", ["list", "chain", "inet", `ums_${rid}`, "post"]).catch(() => ({ stdout: "" }));
    const subnet = /ip saddr (\d+\.\d+\.\d+\.\d+(?:\/\d+)?)/.exec(chain.stdout)?.[1];
    if (subnet) tables.push({ rid, subnet });
  }
  return { routes, tables };
}

/** A server whose unit subnet is not its own on this host (see {@link subnetConflicts}). */
export class SubnetConflictError extends Error {
  constructor(readonly conflicts: readonly string[]) {
    super(`ums cannot use its unit subnet on this host: ${conflicts.join("; ")}`);
    this.name = "SubnetConflictError";
  }
}

/** Refuses (throws {@link SubnetConflictError}) a subnet another server or route of the host uses. */
export async function refuseSubnetConflicts(rid: string, subnet: Subnet | string): Promise<void> {
  const s = typeof subnet === "string" ? parseSubnet(subnet) : subnet;
  const conflicts = subnetConflicts(rid, s, await readHostNetwork());
  if (conflicts.length > 0) throw new SubnetConflictError(conflicts);
}
