import { type Static, Type } from "@sinclair/typebox";

/** Spec 2.6, plus `active`: whether the unit's files are on this checkpoint now. */
export const CheckpointInfo = Type.Object(
  {
    id: Type.String({ description: "v0, v1, … per unit, never reused" }),
    create_time: Type.String({ format: "date-time" }),
    comment: Type.String(),
    source_id: Type.Optional(Type.String({ description: "The checkpoint the unit was on when this one was taken" })),
    health: Type.String({ description: "Empty when healthy; mount_failed when its snapshot is missing" }),
    active: Type.Boolean(),
  },
  { title: "CheckpointInfo" },
);
export type CheckpointInfo = Static<typeof CheckpointInfo>;

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

export const CHECKPOINT_ID_PATTERN = "^v\\d{1,9}$";
