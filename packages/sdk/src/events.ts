import type { EventList, EventType, UnitEvent } from "@ums/protocol";
import { type ClientOpts, resolveClient, type UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";
import { SdkErrorCode, UmsError } from "./errors.js";

export { EVENT_TYPES } from "@ums/protocol/event-types";
export { type VerifyWebhookInput, verifyWebhook } from "@ums/protocol/webhook-signature";
export type { EventType };

/** One lifecycle event of a unit (issue #17, docs/EVENTS.md). */
export interface EventInfo {
  /** `evt_…`; later events have larger ids. A `since` cursor. */
  id: string;
  type: EventType;
  time: Date;
  unit: string | null;
  /** `token:<id>` (an API call), `unit` (the unit's internal API) or `system`. */
  actor: string;
  data: Record<string, unknown>;
}

export interface EventFilter {
  unit?: string;
  types?: readonly EventType[];
  /** Only the events after this id. */
  since?: string;
}

export interface EventListOpts extends EventFilter, RequestOpts {
  /** 1 to 500 (default 100). */
  maxResults?: number;
  continuationToken?: string;
}

export interface EventPage {
  events: EventInfo[];
  hasMore: boolean;
  nextContinuationToken: string | null;
}

export interface EventFollowOpts extends EventFilter {
  /** Ends the follow (the iterator returns). */
  signal?: AbortSignal;
}

function fromWire(e: UnitEvent): EventInfo {
  return { id: e.id, type: e.type, time: new Date(e.time), unit: e.unit, actor: e.actor, data: e.data };
}

function query(f: EventFilter) {
  return {
    unit: f.unit,
    type: f.types && f.types.length > 0 ? f.types.join(",") : undefined,
    since: f.since,
  };
}

/**
 * The organization's lifecycle events: `list` pages them oldest first; `follow` streams them as
 * they happen (after `since`, those stored first). To catch up and then follow with no gap: page
 * until `hasMore` is false, then follow with `since` = the last event's id.
 */
export class Events {
  private readonly client: UmsClient;

  constructor(opts: ClientOpts = {}) {
    this.client = resolveClient(opts);
  }

  async list(opts: EventListOpts = {}): Promise<EventPage> {
    const r = await this.client.request<EventList>("GET", "/v1/events", {
      query: {
        ...query(opts),
        max_results: opts.maxResults,
        continuation_token: opts.continuationToken,
      },
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
    });
    return { events: r.events.map(fromWire), hasMore: r.has_more, nextContinuationToken: r.next_continuation_token };
  }

  /** Every event matching the filter, page after page. */
  async *all(opts: EventListOpts = {}): AsyncGenerator<EventInfo, void, undefined> {
    let token = opts.continuationToken;
    for (;;) {
      const page = await this.list({ ...opts, ...(token !== undefined && { continuationToken: token }) });
      yield* page.events;
      if (!page.hasMore || !page.nextContinuationToken) return;
      token = page.nextContinuationToken;
    }
  }

  /** The events as they happen, until `signal` aborts (the iterator then returns) or the server closes. */
  async *follow(opts: EventFollowOpts = {}): AsyncGenerator<EventInfo, void, undefined> {
    let res: Response;
    try {
      res = await this.client.open("GET", "/v1/events", {
        query: { ...query(opts), follow: true },
        headers: { accept: "application/x-ndjson" },
        timeoutMs: 0,
        signal: opts.signal,
      });
    } catch (err) {
      if (opts.signal?.aborted) return;
      throw err;
    }
    if (res.body === null) return;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    try {
      for (;;) {
        let chunk: { done: boolean; value?: Uint8Array | undefined };
        try {
          chunk = await reader.read();
        } catch (err) {
          if (opts.signal?.aborted) return;
          throw err;
        }
        buffered += decoder.decode(chunk.value, { stream: !chunk.done });
        const lines = buffered.split("\n");
        buffered = chunk.done ? "" : (lines.pop() ?? "");
        for (const line of lines) {
          if (line.trim() === "") continue;
          let e: UnitEvent;
          try {
            e = JSON.parse(line) as UnitEvent;
          } catch {
            throw new UmsError(
              `the event stream sent a line that is not JSON: ${line.slice(0, 200)}`,
              SdkErrorCode.BadResponse,
            );
          }
          yield fromWire(e);
        }
        if (chunk.done) return;
      }
    } finally {
      reader.releaseLock();
      await res.body.cancel().catch(() => {});
    }
  }
}
