import { promises as dns } from "node:dns";
import type { LookupFunction } from "node:net";
import { type Cidr, checkAddress, checkHost, rangeLabel } from "./target-address.js";

export interface PinnedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to all its addresses. */
export type ResolveHost = (name: string) => Promise<readonly PinnedAddress[]>;

/** The target of a user-given base URL is not a public address (the message says why). */
export class TargetRefused extends Error {}

/** The system resolver (getaddrinfo: /etc/hosts, then the host's DNS). */
export const systemResolver: ResolveHost = async (name) =>
  (await dns.lookup(name, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/** A resolver that asks one DNS server only (the server's `--dns-upstream`), A and AAAA. */
export function upstreamResolver(server: { host: string; port: number }): ResolveHost {
  const r = new dns.Resolver({ timeout: 2000, tries: 2 });
  r.setServers([server.host.includes(":") ? `[${server.host}]:${server.port}` : `${server.host}:${server.port}`]);
  return async (name) => {
    const [v4, v6] = await Promise.allSettled([r.resolve4(name), r.resolve6(name)]);
    const out: PinnedAddress[] = [];
    if (v4.status === "fulfilled") for (const address of v4.value) out.push({ address, family: 4 });
    if (v6.status === "fulfilled") for (const address of v6.value) out.push({ address, family: 6 });
    if (out.length === 0 && v4.status === "rejected") throw v4.reason;
    return out;
  };
}

export interface TargetPolicy {
  readonly resolve: ResolveHost;
  /** Ranges reachable although not global unicast (tests: the fake internet's). */
  readonly allowed: readonly Cidr[];
  /** How long a lookup may take (default 10 s). */
  readonly timeoutMs?: number;
}

const ONLY_PUBLIC = "the gateway reaches only public (global unicast) addresses";

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000}s`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/**
 * Issue #19 finding 7: the one address a connection to `url` may go to. A literal is checked as
 * it is; a name is resolved once and every answer checked (one bad answer refuses the name: the
 * next connection could get it). The caller connects to the address returned, through
 * `pinnedLookup`, so nothing resolves the name again between this check and the connect (DNS
 * rebinding). Throws `TargetRefused`, or the resolver's error.
 */
export async function pinTarget(url: URL, policy: TargetPolicy): Promise<PinnedAddress> {
  const host = checkHost(url.hostname, policy.allowed);
  if (host.kind === "refused") throw new TargetRefused(`${host.reason}; ${ONLY_PUBLIC}`);
  if (host.kind === "address") {
    const { address, family, refused } = host.checked;
    if (refused) throw new TargetRefused(`${address} is a ${rangeLabel(refused)} address; ${ONLY_PUBLIC}`);
    return { address, family };
  }
  const answers = await withTimeout(policy.resolve(host.name), policy.timeoutMs ?? 10_000, `resolving '${host.name}'`);
  const checked = answers.map((a) => checkAddress(a.address, policy.allowed));
  if (checked.length === 0) throw new Error(`'${host.name}' resolves to no address`);
  for (const c of checked) {
    if (!c || c.refused) {
      // The address itself stays out of the answer (it would map the host's DNS view for the caller).
      throw new TargetRefused(
        `'${host.name}' resolves to a ${c ? rangeLabel(c.refused as string) : "malformed"} address; ${ONLY_PUBLIC}`,
      );
    }
  }
  const ok = checked as { address: string; family: 4 | 6 }[];
  const pick = ok.find((c) => c.family === 4) ?? (ok[0] as PinnedAddress);
  return { address: pick.address, family: pick.family };
}

/** A `lookup` for net.connect that answers the pinned address whatever it is asked (no DNS). */
export function pinnedLookup(p: PinnedAddress): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    process.nextTick(() => {
      if (options?.all) callback(null, [{ address: p.address, family: p.family }]);
      else callback(null, p.address, p.family);
    });
  }) as unknown as LookupFunction;
}
