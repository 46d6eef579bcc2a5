import { type Static, Type } from "@sinclair/typebox";

/** Spec 2.6, plus `active`: whether the unit's files are on this checkpoint now. */
export const CheckpointInfo = Type.Object(
  {
    id: Type.String({ description: "v0, v1, … per unit, never reused" }),
    create_time: Type.String({ format: "date-time" }),
    comment: Type.String(),
    source_id: Type.Optional(Type.String({ description: "The checkpoint the unit was on when this one was taken" })),
    health: Type.String({
      description:
        "Empty when it can be restored (its snapshot on the unit's node, or its copy in the object store); mount_failed otherwise",
    }),
    active: Type.Boolean(),
    is_auto: Type.Boolean({ description: "Taken by ums itself: the backup before a restore (spec 3.3)" }),
    local: Type.Optional(
      Type.Boolean({
        description:
          "Whether its files are on the unit's node (false once evicted: a restore or fork receives them first); shown with `replication`",
      }),
    ),
    replication: Type.Optional(
      Type.Object(
        {
          state: Type.Union([Type.Literal("pending"), Type.Literal("replicated"), Type.Literal("failed")]),
          bytes: Type.Optional(Type.Integer({ description: "Compressed bytes in the object store" })),
          parent_id: Type.Optional(
            Type.String({ description: "The checkpoint its stored stream is incremental against" }),
          ),
          error: Type.Optional(
            Type.String({ description: "Why the last copy failed; retried at the node's next start" }),
          ),
          time: Type.Optional(Type.String({ format: "date-time", description: "When it was stored, or last failed" })),
        },
        {
          description:
            "Its copy in the server's object store (issue #15, docs/SCALE-OUT.md); absent when the server keeps none",
        },
      ),
    ),
  },
  { title: "CheckpointInfo" },
);
export type CheckpointInfo = Static<typeof CheckpointInfo>;

export const CHECKPOINT_ID_PATTERN = "^v\\d{1,9}$";

/**
 * The checkpoint list's filters (the Sprites clients send them): `history` narrows the list to a
 * checkpoint and those it descends from (its `source_id` chain); `includeAuto` says whether the
 * backups ums takes before a restore are listed (default: yes under /v1/units, as spec 4.2 lists
 * every checkpoint; no under /v1/sprites, as the clients expect).
 */
export const ListCheckpointsQuery = Type.Object(
  {
    history: Type.Optional(
      Type.String({
        pattern: CHECKPOINT_ID_PATTERN,
        description: "A checkpoint id, e.g. v3: that checkpoint and its ancestors",
        "x-message": "must be a checkpoint id such as v3",
      }),
    ),
    includeAuto: Type.Optional(Type.Boolean({ description: "List the automatic backups taken before restores" })),
  },
  { additionalProperties: false },
);
export type ListCheckpointsQuery = Static<typeof ListCheckpointsQuery>;

export const CreateCheckpointRequest = Type.Object(
  { comment: Type.Optional(Type.String({ maxLength: 1000 })) },
  { additionalProperties: false },
);
export type CreateCheckpointRequest = Static<typeof CreateCheckpointRequest>;

/** Spec 6.1: the external checkpoint and restore stream (NDJSON). */
export type CheckpointEvent =
  | { type: "info"; data: string; time: string }
  | { type: "error"; error: string; time: string }
  | { type: "complete"; data: string; time: string; id?: string; backup_id?: string };
