import { ErrorBody, ErrorCode, EVENT_TYPES, EventList, EventsQuery } from "@ums/protocol";
import { ApiError } from "../api/errors.js";
import type { ApiInstance } from "../api/instance.js";
import { commonErrors } from "../api/schemas.js";
import { type EventLog, eventView, FollowSlots, isEventId } from "./event-log.js";

/** Issue #17: follows open at once per organization. */
export const MAX_FOLLOWS_PER_ORG = 32;
/** A follower that leaves this much unread is cut off (it resumes with `since`). */
const MAX_UNREAD_BYTES = 1 << 20;

function types(text: string | undefined): string[] | undefined {
  if (text === undefined || text.trim() === "") return undefined;
  const list = text.split(",").map((t) => t.trim());
  const bad = list.filter((t) => !(EVENT_TYPES as readonly string[]).includes(t));
  if (bad.length > 0) {
    throw ApiError.validation([`type: unknown event type '${bad[0]}'; one of ${EVENT_TYPES.join(", ")}`]);
  }
  return list;
}

function cursor(field: string, id: string | undefined): string | undefined {
  if (id === undefined || id === "") return undefined;
  if (!isEventId(id)) throw ApiError.validation([`${field}: is not an event id (evt_…) this server issued`]);
  return id;
}

/** GET /v1/events: the caller's organization's events, paged, or followed as NDJSON. */
export function eventRoutes(app: ApiInstance, events: EventLog, slots = new FollowSlots(MAX_FOLLOWS_PER_ORG)): void {
  // Follows never end by themselves: a closing server ends them (else its close waits for them).
  const open = new Set<AbortController>();
  app.addHook("preClose", (done) => {
    for (const c of open) c.abort();
    done();
  });
  app.get(
    "/v1/events",
    {
      schema: {
        tags: ["events"],
        summary:
          "The organization's unit lifecycle events, oldest first (paged), or followed as NDJSON with follow=true",
        querystring: EventsQuery,
        response: { 200: EventList, ...commonErrors, 429: ErrorBody },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const filter = { unit: q.unit || undefined, types: types(q.type) };
      const after = cursor("continuation_token", q.continuation_token) ?? cursor("since", q.since);
      const org = req.auth.org;
      if (!q.follow) {
        const limit = q.max_results ?? 100;
        const rows = await events.list(org.id, { ...filter, after, limit: limit + 1 });
        const page = rows.slice(0, limit);
        const hasMore = rows.length > limit;
        reply.header("cache-control", "no-store");
        return {
          events: page.map(eventView),
          has_more: hasMore,
          next_continuation_token: hasMore ? (page.at(-1)?.id ?? null) : null,
        };
      }
      const release = slots.take(org.id);
      if (!release) {
        throw new ApiError(
          429,
          ErrorCode.EventFollowLimit,
          `organization '${org.slug}' already follows its events ${MAX_FOLLOWS_PER_ORG} times; close a follow first`,
        );
      }
      const stop = new AbortController();
      open.add(stop);
      const res = reply.raw;
      res.on("close", () => stop.abort());
      reply.hijack();
      res.writeHead(200, {
        "content-type": "application/x-ndjson",
        "cache-control": "no-store",
        "x-accel-buffering": "no",
      });
      // The head goes at once: a client knows the follow is open before the first event.
      res.flushHeaders();
      try {
        for await (const e of events.follow(org.id, { since: after, ...filter }, stop.signal)) {
          if (res.writableEnded || res.destroyed) break;
          res.write(`${JSON.stringify(eventView(e))}\n`);
          if (res.writableLength > MAX_UNREAD_BYTES) {
            req.log.warn({ org: org.slug }, "an event follower reads too slowly; cut off");
            break;
          }
        }
      } catch (err) {
        req.log.error({ err }, "an event follow failed");
      } finally {
        open.delete(stop);
        release();
        if (!res.writableEnded) res.end();
      }
    },
  );
}
