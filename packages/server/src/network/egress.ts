import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { NetworkLog, NetworkPolicy } from "@ums/protocol";
import type { Logger } from "pino";
import type { UnitRuntime } from "../runtime/runtime.js";
import type { Store } from "../store/store.js";
import { DecisionLog } from "./decision-log.js";
import { CompiledPolicy } from "./matching.js";
import { UnitListener } from "./resolver/listener.js";
import { Upstream } from "./resolver/upstream.js";
import { UnitEgress } from "./unit-egress.js";

/** The policy a new unit has (spec 2.10): no rules, no enforcement. */
export const DEFAULT_NETWORK_POLICY = '{"rules":[]}';

/** A stored policy, compiled; one that no longer compiles (a preset removed) denies everything. */
export function compileStored(json: string): CompiledPolicy {
  try {
    const c = CompiledPolicy.compile(JSON.parse(json) as NetworkPolicy);
    if (c instanceof CompiledPolicy) return c;
  } catch {}
  return CompiledPolicy.compile({ rules: [{ action: "deny", domain: "*" }] }) as CompiledPolicy;
}

/** The first nameserver of the host's /etc/resolv.conf (resolv.conf(5)), the default upstream. */
export function hostResolver(path = "/etc/resolv.conf"): { host: string; port: number } {
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch {}
  for (const line of text.split("\n")) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    const ip = m?.[1]?.replace(/%.*$/, "");
    if (ip && isIP(ip)) return { host: ip, port: 53 };
  }
  return { host: "127.0.0.1", port: 53 };
}

const MAX_LOGS = 2000;

interface Running {
  readonly egress: UnitEgress;
  readonly listener: UnitListener;
}

export interface NetworkEgressDeps {
  readonly store: Store;
  readonly runtime: UnitRuntime;
  readonly upstream: { host: string; port: number };
  readonly log: Logger;
}

/**
 * Egress policy of the running units (issue #6): a resolver on each unit's gateway address, its
 * allow set kept by the answers, policy changes applied at once, and the decisions log.
 */
export class NetworkEgress {
  private readonly running = new Map<string, Running>();
  private readonly logs = new Map<string, DecisionLog>();
  private readonly upstream: Upstream;

  constructor(private readonly deps: NetworkEgressDeps) {
    this.upstream = new Upstream(deps.upstream.host, deps.upstream.port);
  }

  private logOf(unitId: string): DecisionLog {
    let log = this.logs.get(unitId);
    if (!log) {
      log = new DecisionLog();
      this.logs.set(unitId, log);
      // Logs outlive a stop (that is when they are read); the oldest go once there are many.
      if (this.logs.size > MAX_LOGS) this.logs.delete(this.logs.keys().next().value as string);
    }
    return log;
  }

  /** A unit started running (booted or re-adopted): serve its DNS and put its policy in force. */
  async open(unitId: string): Promise<void> {
    await this.close(unitId);
    const link = this.deps.runtime.link(unitId);
    const unit = await this.deps.store.units.getById(unitId);
    if (!link || !unit) return;
    const policy = compileStored(unit.network);
    const egress = new UnitEgress(unitId, link, policy, this.deps.runtime, this.upstream, this.logOf(unitId));
    const listener = new UnitListener(link.hostIp, link.unitIp, (q) => egress.handle(q));
    this.running.set(unitId, { egress, listener });
    await egress.apply(policy);
    try {
      await listener.open();
    } catch (err) {
      // The unit runs on without DNS (lookups fail); its firewall still holds.
      this.deps.log.error({ err, unitId }, "the unit's resolver could not listen on its gateway address");
    }
  }

  async close(unitId: string): Promise<void> {
    const r = this.running.get(unitId);
    this.running.delete(unitId);
    await r?.listener.close();
  }

  /** A policy stored for the unit: in force at once when it runs (else at its next boot). */
  async apply(unitId: string, json: string): Promise<void> {
    const r = this.running.get(unitId);
    if (!r) return;
    await this.deps.runtime.publishNetworkPolicy(unitId, json);
    await r.egress.apply(compileStored(json));
  }

  async report(unitId: string, limit: number): Promise<NetworkLog> {
    const log = this.logOf(unitId);
    const drops = await this.deps.runtime.egressDrops(unitId);
    const egress = this.running.get(unitId)?.egress;
    return {
      denied_lookups: log.deniedLookups,
      dropped_packets: drops?.packets ?? 0,
      decisions: log.recent(limit),
      dropped: (drops?.destinations ?? []).slice(0, limit).map((d) => ({
        address: d.address,
        names: egress?.namesOf(d.address) ?? [],
        packets: d.packets,
        last_time: new Date(d.lastDropMs).toISOString(),
      })),
    };
  }

  forget(unitId: string): void {
    this.logs.delete(unitId);
  }

  async closeAll(): Promise<void> {
    for (const id of [...this.running.keys()]) await this.close(id);
    this.upstream.close();
  }
}
