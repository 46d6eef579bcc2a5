import { randomBytes } from "node:crypto";
import type { EventType, UnitEvent } from "@ums/protocol";
import type { Logger } from "pino";
import type { EventRecord } from "../store/records.js";
import type { EventQuery, Store } from "../store/store.js";

/** Issue #17 (docs/EVENTS.md): how long events are kept, and how many per organization at most. */
export const EVENT_RETENTION_MS = 7 * 86_400_000;
export const MAX_EVENTS_PER_ORG = 10_000;
/** An organization's count is brought back to MAX - PRUNE_EVERY after this many writes: never over MAX. */
const PRUNE_EVERY = 100;
const PRUNE_TIME_EVERY_MS = 3600_000;

/** Who caused an event: an API call (`token:<id>`), the unit itself (its internal API), or ums. */
export type Actor = `token:${string}` | "unit" | "system";

export interface NewEvent {
  readonly orgId: string;
  readonly type: EventType;
  readonly unit: string | null;
  readonly actor: Actor;
  readonly data?: Record<string, unknown>;
}

/** Anything that records events: the EventLog, or a stand-in in unit tests. */
export type EmitEvent = (e: NewEvent) => void;

export interface EventLogLimits {
  readonly retentionMs: number;
  readonly maxPerOrg: number;
}

export function eventView(e: EventRecord): UnitEvent {
  return {
    id: e.id,
    type: e.type as EventType,
    time: e.at,
    unit: e.unit,
    actor: e.actor,
    data: JSON.parse(e.data) as Record<string, unknown>,
  };
}

/** Whether an id has the shape of the ids this log issues (a `since` or a continuation token). */
export function isEventId(id: string): boolean {
  return /^evt_[0-9a-z]{13}[0-9a-f]{6}$/.test(id);
}

/**
 * The organization's lifecycle events (issue #17): each one gets an increasing id when emitted,
 * is written in that order (one write at a time), and only then goes to subscribers (follows,
 * webhooks): a follow that pages the store and then takes what subscribers get sees each event
 * once, with no gap. Kept EVENT_RETENTION_MS and MAX_EVENTS_PER_ORG per organization at most. One
 * process writes (the server); a write that fails is logged and the event is lost.
 */
export class EventLog {
  private chain: Promise<void> = Promise.resolve();
  private lastMs = 0;
  private seq = 0;
  /** The id of the last event written (a follow without `since` starts after it). */
  private lastWritten = "";
  private readonly subscribers = new Set<(e: EventRecord) => void>();
  private readonly writesByOrg = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly limits: EventLogLimits = { retentionMs: EVENT_RETENTION_MS, maxPerOrg: MAX_EVENTS_PER_ORG },
  ) {}

  /** Prunes what is over the limits now, then every hour. */
  async start(): Promise<void> {
    await this.pruneAll();
    this.timer = setInterval(() => {
      this.chain = this.chain.then(() =>
        this.pruneAll().catch((err) => this.log.warn({ err }, "pruning events failed; the next hour tries again")),
      );
    }, PRUNE_TIME_EVERY_MS);
    this.timer.unref();
  }

  /** Waits for the events emitted so far to be written (and given to subscribers). */
  settled(): Promise<void> {
    return this.chain;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.chain;
  }

  private nextId(now: number): string {
    if (now > this.lastMs) {
      this.lastMs = now;
      this.seq = 0;
    } else {
      this.seq += 1;
      if (this.seq >= 36 ** 4) {
        this.lastMs += 1;
        this.seq = 0;
      }
    }
    return `evt_${this.lastMs.toString(36).padStart(9, "0")}${this.seq.toString(36).padStart(4, "0")}${randomBytes(3).toString("hex")}`;
  }

  /** Records an event (in the background; its failure is logged). */
  readonly emit: EmitEvent = (e) => {
    const now = Date.now();
    const rec: EventRecord = Object.freeze({
      id: this.nextId(now),
      orgId: e.orgId,
      at: new Date(now).toISOString(),
      type: e.type,
      unit: e.unit,
      actor: e.actor,
      data: JSON.stringify(e.data ?? {}),
    });
    this.chain = this.chain.then(() => this.write(rec));
  };

  private async write(rec: EventRecord): Promise<void> {
    try {
      await this.store.events.add(rec);
    } catch (err) {
      this.log.error({ err, type: rec.type, unit: rec.unit }, "an event could not be recorded; it is lost");
      return;
    }
    this.lastWritten = rec.id;
    for (const s of this.subscribers) {
      try {
        s(rec);
      } catch (err) {
        this.log.error({ err }, "an event subscriber failed");
      }
    }
    const n = (this.writesByOrg.get(rec.orgId) ?? 0) + 1;
    this.writesByOrg.set(rec.orgId, n % PRUNE_EVERY);
    if (n >= PRUNE_EVERY) {
      await this.store.events
        .pruneOrg(rec.orgId, this.limits.maxPerOrg - PRUNE_EVERY)
        .catch((err) => this.log.warn({ err }, "pruning an organization's events failed"));
    }
  }

  private async pruneAll(): Promise<void> {
    await this.store.events.pruneBefore(new Date(Date.now() - this.limits.retentionMs).toISOString());
    for (const org of await this.store.events.orgIds()) {
      await this.store.events.pruneOrg(org, this.limits.maxPerOrg - PRUNE_EVERY);
    }
  }

  /** Every event written from now on, in order (webhooks, follows); returns the unsubscribe. */
  subscribe(fn: (e: EventRecord) => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  list(orgId: string, q: EventQuery): Promise<EventRecord[]> {
    return this.store.events.list(orgId, q);
  }

  /**
   * The organization's events after `since` (or from now on without it), matching `filter`, in
   * order, until `signal` aborts: first those in the store, then the live ones.
   */
  async *follow(
    orgId: string,
    q: { since?: string | undefined; unit?: string | undefined; types?: readonly string[] | undefined },
    signal: AbortSignal,
  ): AsyncGenerator<EventRecord> {
    const buffer: EventRecord[] = [];
    let wake: (() => void) | undefined;
    const unsubscribe = this.subscribe((e) => {
      if (e.orgId !== orgId) return;
      buffer.push(e);
      wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    const matches = (e: EventRecord) =>
      (!q.unit || e.unit === q.unit) && (!q.types || q.types.length === 0 || q.types.includes(e.type));
    try {
      // Everything written up to the subscription is in the store; everything after comes to it.
      let cursor = q.since ?? this.lastWritten;
      if (q.since !== undefined) {
        for (;;) {
          const page = await this.store.events.list(orgId, { after: cursor, unit: q.unit, types: q.types, limit: 500 });
          for (const e of page) {
            if (signal.aborted) return;
            cursor = e.id;
            yield e;
          }
          if (page.length < 500) break;
        }
      }
      while (!signal.aborted) {
        const e = buffer.shift();
        if (!e) {
          await new Promise<void>((r) => {
            wake = r;
          });
          wake = undefined;
          continue;
        }
        if (e.id <= cursor || !matches(e)) continue;
        cursor = e.id;
        yield e;
      }
    } finally {
      unsubscribe();
      signal.removeEventListener("abort", onAbort);
    }
  }
}

/** Follows open per organization (at most `max`; issue #17: 32). */
export class FollowSlots {
  private readonly open = new Map<string, number>();
  constructor(private readonly max: number) {}

  /** Takes a slot (false when the organization has `max` open); `release` gives it back once. */
  take(orgId: string): (() => void) | undefined {
    const n = this.open.get(orgId) ?? 0;
    if (n >= this.max) return undefined;
    this.open.set(orgId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(orgId) ?? 1) - 1;
      if (left <= 0) this.open.delete(orgId);
      else this.open.set(orgId, left);
    };
  }
}
