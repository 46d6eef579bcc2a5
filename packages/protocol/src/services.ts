import { type Static, Type } from "@sinclair/typebox";

// Spec 2.7, 3.2, 4.6, 4.7 and 6.4: services, their state and their NDJSON streams; docs/ARCHITECTURE.md section 10
// adds `restart_count` (and ums adds `next_restart_at`) to the state.

/** A service name: used as a file name for its logs, so no `/`, no leading dot. */
export const SERVICE_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$";

export const ServiceRequest = Type.Object(
  {
    cmd: Type.String({ minLength: 1, maxLength: 4096, description: "Path to the executable (or a name on PATH)" }),
    args: Type.Optional(Type.Array(Type.String({ maxLength: 65536 }), { maxItems: 1024 })),
    needs: Type.Optional(
      Type.Array(Type.String({ pattern: SERVICE_NAME_PATTERN }), {
        maxItems: 64,
        description: "Services that start first",
      }),
    ),
    dir: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    env: Type.Optional(
      Type.Record(Type.String({ pattern: "^[^=\\u0000]+$" }), Type.String({ maxLength: 65536 }), {
        maxProperties: 256,
      }),
    ),
    http_port: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 65535 }), Type.Null()])),
  },
  { additionalProperties: false, title: "ServiceRequest" },
);
export type ServiceRequest = Static<typeof ServiceRequest>;

export const ServiceStatus = Type.Union(
  ["stopped", "starting", "running", "stopping", "failed"].map((s) => Type.Literal(s)),
);

export const ServiceState = Type.Object(
  {
    name: Type.String(),
    status: ServiceStatus,
    pid: Type.Optional(Type.Integer()),
    started_at: Type.Optional(Type.String({ format: "date-time" })),
    error: Type.Optional(Type.String()),
    restart_count: Type.Integer({ description: "Restarts after a crash since the service was last started" }),
    next_restart_at: Type.Optional(
      Type.String({ format: "date-time", description: "When a crashed service restarts" }),
    ),
  },
  { title: "ServiceState" },
);
export type ServiceState = Static<typeof ServiceState>;

export const ServiceResponse = Type.Object(
  {
    name: Type.String(),
    cmd: Type.String(),
    args: Type.Array(Type.String()),
    needs: Type.Array(Type.String()),
    dir: Type.Optional(Type.String()),
    env: Type.Optional(Type.Record(Type.String(), Type.String())),
    http_port: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
    state: Type.Optional(Type.Union([ServiceState, Type.Null()])),
  },
  { title: "ServiceResponse" },
);
export type ServiceResponse = Static<typeof ServiceResponse>;

export const ServiceSignalRequest = Type.Object(
  {
    name: Type.String({ pattern: SERVICE_NAME_PATTERN }),
    signal: Type.String({ minLength: 1, maxLength: 16, description: "TERM, KILL, HUP, … (with or without SIG)" }),
  },
  { additionalProperties: false, title: "ServiceSignalRequest" },
);
export type ServiceSignalRequest = Static<typeof ServiceSignalRequest>;

/** Spec 6.4: one line of a service log or restart stream; `timestamp` is Unix milliseconds. */
export type ServiceEvent =
  | { type: "stdout" | "stderr"; data: string; timestamp: number }
  | { type: "started" | "stopping"; timestamp: number }
  | { type: "stopped" | "exit"; exit_code: number; timestamp: number }
  | { type: "error"; data: string; timestamp: number }
  | { type: "complete"; log_files: Record<string, string>; timestamp: number };

/** Keep-awake tasks of the internal API: a unit stays `running` while one lives (docs/ARCHITECTURE.md section 5). */
export const TASK_MAX_EXPIRE_MS = 24 * 3600 * 1000;
