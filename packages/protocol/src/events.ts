import { type Static, Type } from "@sinclair/typebox";

import { EVENT_TYPES } from "./event-types.js";

export { EVENT_TYPES, type EventType } from "./event-types.js";

export const EventTypeSchema = Type.Union(
  EVENT_TYPES.map((t) => Type.Literal(t)),
  { description: "An event type" },
);

/** One event, as GET /v1/events lists it, the follow streams it and a webhook delivers it. */
export const UnitEvent = Type.Object(
  {
    id: Type.String({ description: "`evt_…`, increasing: later events have larger ids; a `since` cursor" }),
    type: EventTypeSchema,
    time: Type.String({ format: "date-time" }),
    unit: Type.Union([Type.String(), Type.Null()], { description: "The unit's name (null for none)" }),
    actor: Type.String({
      description: "Who caused it: `token:<token id>` (an API call), `unit` (the unit's internal API) or `system`",
    }),
    data: Type.Record(Type.String(), Type.Unknown(), { description: "Details by type (docs/EVENTS.md)" }),
  },
  { title: "UnitEvent" },
);
export type UnitEvent = Static<typeof UnitEvent>;

export const EventList = Type.Object(
  {
    events: Type.Array(UnitEvent, { description: "Oldest first" }),
    has_more: Type.Boolean(),
    next_continuation_token: Type.Union([Type.String(), Type.Null()]),
  },
  { title: "EventList" },
);
export type EventList = Static<typeof EventList>;

export const WebhookCreateRequest = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      pattern: "^https?://",
      "x-message": "must be an http:// or https:// URL of at most 2048 characters",
      description: "Where deliveries are POSTed",
    }),
    events: Type.Optional(
      Type.Array(EventTypeSchema, {
        maxItems: 32,
        uniqueItems: true,
        description: "Event types delivered; omitted or empty: every type",
      }),
    ),
  },
  { additionalProperties: false, title: "WebhookCreateRequest" },
);
export type WebhookCreateRequest = Static<typeof WebhookCreateRequest>;

export const WebhookInfo = Type.Object(
  {
    id: Type.String({ description: "`whk_…`" }),
    url: Type.String(),
    events: Type.Array(EventTypeSchema, { description: "Empty: every type" }),
    created_at: Type.String({ format: "date-time" }),
    last_status: Type.Union([Type.Integer(), Type.Null()], {
      description: "The HTTP status of the last delivery attempt (0: no answer, see last_error); null: none yet",
    }),
    last_error: Type.Union([Type.String(), Type.Null()]),
    last_attempt_at: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
    last_event_id: Type.Union([Type.String(), Type.Null()], { description: "The event of the last attempt" }),
  },
  { title: "WebhookInfo" },
);
export type WebhookInfo = Static<typeof WebhookInfo>;

/** The create's answer: the only time the signing secret is shown. */
export const WebhookCreated = Type.Intersect(
  [WebhookInfo, Type.Object({ secret: Type.String({ description: "`whsec_…`: signs deliveries; shown once" }) })],
  { title: "WebhookCreated" },
);
export type WebhookCreated = Static<typeof WebhookCreated>;

/** GET /v1/events query. */
export const EventsQuery = Type.Object(
  {
    unit: Type.Optional(Type.String({ maxLength: 256, description: "Only this unit's events" })),
    type: Type.Optional(
      Type.String({
        maxLength: 1024,
        description: "Only these types, comma-separated (e.g. `unit.booted,unit.cooled`)",
      }),
    ),
    since: Type.Optional(
      Type.String({
        maxLength: 64,
        description: "An event id: only the events after it (a page's last, a follow's cursor)",
      }),
    ),
    max_results: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    continuation_token: Type.Optional(
      Type.String({ maxLength: 64, description: "`next_continuation_token` of the previous page" }),
    ),
    follow: Type.Optional(
      Type.Boolean({
        description:
          "Stream the events as NDJSON, one per line, as they happen: after `since` if given (those stored first), else from now",
      }),
    ),
  },
  { additionalProperties: false },
);
export type EventsQuery = Static<typeof EventsQuery>;

export const WebhookList = Type.Object({ webhooks: Type.Array(WebhookInfo) }, { title: "WebhookList" });
export type WebhookList = Static<typeof WebhookList>;
