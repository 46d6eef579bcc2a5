import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/**
 * Which hosts a user-given base URL may lead the gateway to (issue #19 finding 7, docs/SECURITY.md):
 * global unicast addresses only. The ranges come from ipaddr.js (the IANA special-purpose address
 * registries, RFC 6890): every range it names other than `unicast` is refused, and of IPv6 only
 * 2000::/3 is global unicast at all (RFC 4291 §2.4, RFC 3587), which also refuses the deprecated
 * IPv4-compatible form `::a.b.c.d`. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, RFC 4291
 * §2.5.5.2) is the IPv4 address it carries and is judged as that.
 */

export type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** IANA's IPv6 global unicast block. */
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR("2000::/3");

/** How a range is named in messages (ipaddr.js's name when it is not here). */
const LABELS: Readonly<Record<string, string>> = {
  unspecified: "unspecified (this host)",
  loopback: "loopback",
  private: "private",
  linkLocal: "link-local",
  uniqueLocal: "unique local",
  carrierGradeNat: "shared (carrier-grade NAT)",
  multicast: "multicast",
  broadcast: "broadcast",
  reserved: "reserved",
  rfc6052: "NAT64 (RFC 6052)",
  rfc6145: "IPv4-translated (RFC 6145)",
  "6to4": "6to4",
  teredo: "Teredo",
  notGlobal: "non-global (outside 2000::/3)",
};

export function rangeLabel(range: string): string {
  return LABELS[range] ?? range;
}

/** Parses CIDRs of a configuration (`where` names it in the error). */
export function parseRanges(list: readonly unknown[], where: string): Cidr[] {
  return list.map((c) => {
    if (typeof c !== "string" || !ipaddr.isValidCIDR(c)) throw new Error(`${where}: '${String(c)}' is not a CIDR`);
    return ipaddr.parseCIDR(c);
  });
}

function inRange(a: ipaddr.IPv4 | ipaddr.IPv6, [net, bits]: Cidr): boolean {
  if (a.kind() === "ipv4" && net.kind() === "ipv4") return (a as ipaddr.IPv4).match(net as ipaddr.IPv4, bits);
  if (a.kind() === "ipv6" && net.kind() === "ipv6") return (a as ipaddr.IPv6).match(net as ipaddr.IPv6, bits);
  return false;
}

export interface CheckedAddress {
  /** The address to connect to: canonical, an IPv4-mapped address as its IPv4 address. */
  readonly address: string;
  readonly family: 4 | 6;
  /** Why it is refused (a range name, see `rangeLabel`); undefined: global unicast or allowed. */
  readonly refused: string | undefined;
}

/**
 * IPv6 text as the system reads it (inet_pton, and WHATWG URLs: hex groups, zone dropped).
 * ipaddr.js would read `::a.b.c.d` as IPv4-mapped, where the system reads IPv4-compatible.
 */
function canonicalIPv6(ip: string): string | undefined {
  try {
    return new URL(`http://[${ip.replace(/%.*$/, "")}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
}

/** Classifies one IP address (any form ipaddr.js parses); undefined when `ip` is not one. */
export function checkAddress(ip: string, allowed: readonly Cidr[] = []): CheckedAddress | undefined {
  let a: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    const text = ip.includes(":") ? canonicalIPv6(ip) : ip;
    if (text === undefined) return undefined;
    a = ipaddr.process(text);
  } catch {
    return undefined;
  }
  const family = a.kind() === "ipv4" ? 4 : 6;
  const address = a.toString();
  if (allowed.some((r) => inRange(a, r))) return { address, family, refused: undefined };
  const range = a.range();
  if (range !== "unicast") return { address, family, refused: range };
  if (a.kind() === "ipv6" && !(a as ipaddr.IPv6).match(GLOBAL_UNICAST_V6)) {
    return { address, family, refused: "notGlobal" };
  }
  return { address, family, refused: undefined };
}

export type HostVerdict =
  | { readonly kind: "address"; readonly checked: CheckedAddress }
  | { readonly kind: "name"; readonly name: string }
  | { readonly kind: "refused"; readonly reason: string };

/**
 * Judges a URL's host without any lookup: an address literal (bracketed IPv6, or any form an
 * IPv4 parser of the resolver takes: `127.1`, `0x7f.1`, `0177.0.0.1`, `2130706433`, trailing
 * dots) is checked as that address; `localhost` and names under it (RFC 6761 §6.3), in any case
 * and with trailing dots, are refused; any other name is left to be resolved and checked then.
 */
export function checkHost(hostname: string, allowed: readonly Cidr[] = []): HostVerdict {
  const host = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  const bare = host.toLowerCase().replace(/\.+$/, "");
  const literal = isIP(host) ? host : ipaddr.IPv4.isValid(bare) ? bare : undefined;
  if (literal !== undefined) {
    const checked = checkAddress(literal, allowed);
    if (checked) return { kind: "address", checked };
  }
  if (bare === "") return { kind: "refused", reason: "has no host name" };
  if (bare === "localhost" || bare.endsWith(".localhost")) {
    return { kind: "refused", reason: `'${hostname}' names this machine (localhost, RFC 6761 §6.3)` };
  }
  return { kind: "name", name: host };
}
