import type { EventType, UnitEvent } from "@ums/protocol";
import type { Logger } from "pino";
import type { EventRecord } from "../store/records.js";
import type { EventFeed, EventQuery, Store } from "../store/store.js";
import { EventIds } from "./event-id.js";

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

export { isEventId } from "./event-id.js";

/** How long a write waits to hear its own event on the feed (then subscribers get it when it comes). */
const OWN_NOTICE_MS = 2_000;
/** After the feed's connection broke: the store is read back this far before the break (clocks differ). */
const CATCH_UP_MARGIN_MS = 30_000;
/** The most events read back after a break. */
const CATCH_UP_MAX = 10_000;

/**
 * The organization's lifecycle events (issue #17): each one gets an increasing id when emitted,
 * is written in that order (one write at a time), and only then goes to subscribers (follows,
 * webhooks): a follow that pages the store and then takes what subscribers get sees each event
 * once, with no gap. Kept EVENT_RETENTION_MS and MAX_EVENTS_PER_ORG per organization at most. A
 * write that fails is logged and the event is lost.
 *
 * Issue #15: with PostgreSQL several processes record events (API processes, nodes). Subscribers
 * then get every process's events from the store's feed, in the order of the commits per
 * organization (its own included: they go the same way); a break of the feed's connection is
 * made up by reading the store back.
 */
export class EventLog {
  private chain: Promise<void> = Promise.resolve();
  private readonly ids = new EventIds();
  /** The id of the last event given to subscribers, per organization (a follow without `since` starts after it). */
  private readonly delivered = new Map<string, string>();
  private readonly subscribers = new Set<(e: EventRecord) => void>();
  private readonly writesByOrg = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private readonly feed: EventFeed | undefined;
  private unsubscribeFeed: (() => void) | undefined;
  /** Own events written and not yet heard on the feed, by id. */
  private readonly own = new Map<string, () => void>();
  /** While the store is read back after a break, what the feed brings waits here. */
  private held: EventRecord[] | undefined;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly limits: EventLogLimits = { retentionMs: EVENT_RETENTION_MS, maxPerOrg: MAX_EVENTS_PER_ORG },
  ) {
    this.feed = store.feed;
  }

  /** Listens to the deployment's events (PostgreSQL); prunes what is over the limits now, then every hour. */
  async start(): Promise<void> {
    if (this.feed) {
      this.unsubscribeFeed = this.feed.subscribe({
        event: (e) => {
          if (this.held) this.held.push(e);
          else this.deliver(e);
        },
        resumed: (at) => {
          // What the feed brings from now on waits until the store was read back.
          this.held ??= [];
          this.chain = this.chain.then(() => this.catchUp(at));
        },
      });
      await this.feed.start();
    }
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
    this.unsubscribeFeed?.();
    await this.chain;
    for (const done of this.own.values()) done();
  }

  /** Records an event (in the background; its failure is logged). */
  readonly emit: EmitEvent = (e) => {
    const now = Date.now();
    const rec: EventRecord = Object.freeze({
      id: this.ids.next(now),
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
    let stored: EventRecord;
    try {
      stored = await this.store.events.add(rec);
    } catch (err) {
      this.log.error({ err, type: rec.type, unit: rec.unit }, "an event could not be recorded; it is lost");
      return;
    }
    // With a feed, subscribers get it from there, in the deployment's order; while the feed is
    // lost, the store is read back once it listens again.
    if (!this.feed) this.deliver(stored);
    else if (this.feed.listening) await this.heard(stored);
    const n = (this.writesByOrg.get(rec.orgId) ?? 0) + 1;
    this.writesByOrg.set(rec.orgId, n % PRUNE_EVERY);
    if (n >= PRUNE_EVERY) {
      await this.store.events
        .pruneOrg(rec.orgId, this.limits.maxPerOrg - PRUNE_EVERY)
        .catch((err) => this.log.warn({ err }, "pruning an organization's events failed"));
    }
  }

  /** Resolves once the feed brought our own event back (or after OWN_NOTICE_MS): then it was delivered. */
  private heard(e: EventRecord): Promise<void> {
    if ((this.delivered.get(e.orgId) ?? "") >= e.id) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.own.delete(e.id);
        resolve();
      }, OWN_NOTICE_MS);
      timer.unref();
      this.own.set(e.id, () => {
        clearTimeout(timer);
        this.own.delete(e.id);
        resolve();
      });
    });
  }

  /** Gives an event to the subscribers, once and in order per organization. */
  private deliver(e: EventRecord): void {
    if ((this.delivered.get(e.orgId) ?? "") >= e.id) return;
    this.delivered.set(e.orgId, e.id);
    for (const s of this.subscribers) {
      try {
        s(e);
      } catch (err) {
        this.log.error({ err }, "an event subscriber failed");
      }
    }
    this.own.get(e.id)?.();
  }

  /** After the feed was lost at `at`: what was recorded meanwhile, read from the store, then what the feed held. */
  private async catchUp(at: number): Promise<void> {
    try {
      const since = new Date(at - CATCH_UP_MARGIN_MS).toISOString();
      const missed = await this.store.events.recent(since, CATCH_UP_MAX);
      for (const e of missed) this.deliver(e);
    } catch (err) {
      this.log.error(
        { err },
        "events recorded while the feed was lost could not be read; follows and webhooks miss them",
      );
    } finally {
      const held = this.held ?? [];
      this.held = undefined;
      for (const e of held) this.deliver(e);
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
      let cursor = q.since ?? this.delivered.get(orgId) ?? "";
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
