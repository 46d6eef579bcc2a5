import type { NetworkDecision } from "@ums/protocol";
import { metrics } from "../metrics/server-metrics.js";
import type { EgressAllowance, UnitLink, UnitRuntime } from "../runtime/runtime.js";
import type { DecisionLog } from "./decision-log.js";
import type { CompiledPolicy } from "./matching.js";
import { type AddressAnswer, formErr, parseQuery, RCODE, readAnswer, respond } from "./resolver/packets.js";
import type { Upstream } from "./resolver/upstream.js";

/** The name that resolves to the asking unit's gateway address, whatever its policy. */
export const GATEWAY_NAME = "ums.internal";

/**
 * IPv6 egress is off (issue #6), so AAAA answers are empty; HTTPS/SVCB records are too, since their
 * address hints would name addresses no A answer allowed (RFC 9460 section 7.3).
 */
const NODATA_TYPES = new Set(["AAAA", "HTTPS", "SVCB", "65", "64"]);

/** An allowed address outlives its answer's TTL by a grace, so a client's cached answer stays usable. */
export function allowanceSeconds(ttlS: number): number {
  return ttlS + Math.min(60, 5 + Math.ceil(ttlS / 10));
}

const MAX_NAMES = 4096;

/**
 * One running unit's resolver logic (issue #6, docs/ARCHITECTURE.md section 7): a denied name gets REFUSED at
 * once; an allowed one is forwarded and, under an enforced policy, its IPv4 addresses join the
 * unit's allow set before the answer is returned. Addresses seen are remembered per name so that
 * a policy change can recompute the allow set (and cut what is no longer allowed).
 */
export class UnitEgress {
  private readonly names = new Map<string, Map<string, number>>();
  /** What the kernel's allow set holds, and until when (ms). */
  private inSet = new Map<string, number>();
  /** nft changes of this unit, one at a time, so a policy change never interleaves with an answer's. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly unitId: string,
    private readonly link: UnitLink,
    private policy: CompiledPolicy,
    private readonly runtime: UnitRuntime,
    private readonly upstream: Upstream,
    private readonly log: DecisionLog,
  ) {}

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => {});
    return next;
  }

  private note(name: string, type: string, verdict: NetworkDecision["verdict"], rule?: string, ips?: string[]) {
    metrics.resolverLookup(verdict);
    this.log.add({
      time: new Date().toISOString(),
      name,
      type,
      verdict,
      ...(rule && { rule }),
      ...(ips && ips.length > 0 && { addresses: ips }),
    });
  }

  async handle(buf: Buffer): Promise<Buffer | undefined> {
    const q = parseQuery(buf);
    if (!q) return formErr(buf);
    if (q.name === GATEWAY_NAME) {
      const answers =
        q.type === "A" ? [{ type: "A" as const, name: q.question.name, ttl: 60, data: this.link.hostIp }] : [];
      return respond(q, RCODE.NOERROR, answers);
    }
    const first = this.policy.decide(q.name);
    if (first.verdict === "denied") {
      this.note(q.name, q.type, "denied", first.rule);
      return respond(q, RCODE.REFUSED);
    }
    if (NODATA_TYPES.has(q.type)) return respond(q, RCODE.NOERROR);
    let raw: Buffer;
    try {
      raw = await this.upstream.query(buf);
    } catch {
      metrics.resolverLookup("failed");
      return respond(q, RCODE.SERVFAIL);
    }
    const answer = readAnswer(raw);
    if (!answer) {
      metrics.resolverLookup("failed");
      return respond(q, RCODE.SERVFAIL);
    }
    this.remember(q.name, answer.addresses);
    const ips = answer.addresses.map((a) => a.ip);
    if (!this.policy.enforced) {
      this.note(q.name, q.type, "open", undefined, ips);
      return raw;
    }
    // Decided again at the moment of the allow: a policy change may have come meanwhile.
    return this.serial(async () => {
      const now = this.policy.decide(q.name);
      if (now.verdict === "denied") {
        this.note(q.name, q.type, "denied", now.rule);
        return respond(q, RCODE.REFUSED);
      }
      if (now.verdict === "allowed") await this.allow(answer.addresses);
      this.note(q.name, q.type, now.verdict, now.rule, ips);
      return raw;
    });
  }

  /** Adds what the set lacks or would lose before the TTL ends: one nft call per answer, none when cached. */
  private async allow(addresses: readonly AddressAnswer[]): Promise<void> {
    const now = Date.now();
    const needed: EgressAllowance[] = addresses
      .filter((a) => (this.inSet.get(a.ip) ?? 0) < now + a.ttlS * 1000)
      .map((a) => ({ ip: a.ip, timeoutS: allowanceSeconds(a.ttlS) }));
    if (needed.length === 0) return;
    await this.runtime.allowEgress(this.unitId, needed);
    for (const a of needed) this.inSet.set(a.ip, now + a.timeoutS * 1000);
  }

  /** The remembered names whose answers held `ip`. */
  namesOf(ip: string): string[] {
    return [...this.names].filter(([, ips]) => ips.has(ip)).map(([name]) => name);
  }

  private remember(name: string, addresses: readonly AddressAnswer[]): void {
    if (addresses.length === 0) return;
    const now = Date.now();
    const ips = this.names.get(name) ?? new Map<string, number>();
    for (const a of addresses) ips.set(a.ip, Math.max(ips.get(a.ip) ?? 0, now + allowanceSeconds(a.ttlS) * 1000));
    this.names.delete(name);
    this.names.set(name, ips);
    if (this.names.size > MAX_NAMES) this.names.delete(this.names.keys().next().value as string);
  }

  /**
   * A new policy, at once (issue #6): the mode and the allow set are replaced in one nft
   * transaction with the addresses of remembered names the new policy allows; addresses no
   * longer allowed are gone from the set, so the next packet of a connection to them is reset.
   */
  apply(policy: CompiledPolicy): Promise<void> {
    return this.serial(async () => {
      this.policy = policy;
      const now = Date.now();
      const allow = new Map<string, number>();
      for (const [name, ips] of this.names) {
        for (const [ip, until] of ips) if (until <= now) ips.delete(ip);
        if (ips.size === 0) {
          this.names.delete(name);
          continue;
        }
        if (policy.decide(name).verdict !== "allowed") continue;
        for (const [ip, until] of ips) allow.set(ip, Math.max(allow.get(ip) ?? 0, until));
      }
      const list = [...allow].map(([ip, until]) => ({ ip, timeoutS: Math.ceil((until - now) / 1000) }));
      await this.runtime.setEgress(this.unitId, policy.enforced, list);
      this.inSet = new Map([...allow]);
    });
  }
}
