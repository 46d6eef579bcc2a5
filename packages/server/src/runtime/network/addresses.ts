/**
 * Each unit gets a /30 of the unit subnet: the host end of its veth pair is the first address,
 * the unit the second. Pure arithmetic, so slots map to addresses the same way after a restart.
 */
export interface Subnet {
  readonly base: number;
  readonly prefix: number;
}

export function parseSubnet(cidr: string): Subnet {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr.trim());
  const octets = m ? m.slice(1, 5).map(Number) : [];
  const prefix = Number(m?.[5]);
  if (!m || octets.some((o) => o > 255) || prefix < 8 || prefix > 28) {
    throw new Error(`unit subnet '${cidr}' must be an IPv4 CIDR with a prefix from /8 to /28, e.g. 10.209.0.0/16`);
  }
  const [a = 0, b = 0, c = 0, d = 0] = octets;
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { base: ((((a << 24) | (b << 16) | (c << 8) | d) >>> 0) & mask) >>> 0, prefix };
}

export function subnetCidr(subnet: Subnet): string {
  return `${ipv4(subnet.base)}/${subnet.prefix}`;
}

export function slotCount(subnet: Subnet): number {
  return 2 ** (32 - subnet.prefix) / 4;
}

export function ipv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

export function slotAddresses(subnet: Subnet, slot: number): { hostIp: string; unitIp: string } {
  if (!Number.isInteger(slot) || slot < 0 || slot >= slotCount(subnet)) throw new Error(`no address slot ${slot}`);
  const base = subnet.base + slot * 4;
  return { hostIp: ipv4(base + 1), unitIp: ipv4(base + 2) };
}
