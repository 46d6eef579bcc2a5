import { type Static, Type } from "@sinclair/typebox";

// The JSON schemas of exec (spec 4.3, 2.8); the frames and control messages are in exec.ts, which the
// agent's bundle imports without TypeBox.

/** Spec 2.8: an exec session, as listed by GET /v1/units/{name}/exec (and the agent's GET /exec). */
export const ExecSession = Type.Object(
  {
    id: Type.Integer(),
    command: Type.String(),
    created: Type.String({ format: "date-time" }),
    is_active: Type.Boolean(),
    last_activity: Type.String({ format: "date-time" }),
    tty: Type.Boolean(),
    workdir: Type.String(),
    bytes_per_second: Type.Number(),
  },
  { title: "ExecSession" },
);
export type ExecSession = Static<typeof ExecSession>;

/** Spec 4.3: the exec query, for HTTP and websocket exec alike. */
export const ExecQuery = Type.Object(
  {
    cmd: Type.Array(Type.String({ maxLength: 65536 }), {
      minItems: 1,
      maxItems: 4096,
      description: "Command and arguments; repeat for each",
    }),
    path: Type.Optional(
      Type.String({ minLength: 1, maxLength: 4096, description: "Executable; defaults to the first cmd" }),
    ),
    stdin: Type.Optional(
      Type.Boolean({ description: "Forward the request body (or websocket stdin frames) to the process" }),
    ),
    env: Type.Optional(
      Type.Array(Type.String({ maxLength: 65536 }), { maxItems: 4096, description: "KEY=VALUE, repeatable" }),
    ),
    dir: Type.Optional(
      Type.String({ minLength: 1, maxLength: 4096, description: "Working directory; default /home/unit" }),
    ),
    tty: Type.Optional(Type.Boolean()),
    cols: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    rows: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    user: Type.Optional(Type.Union([Type.Literal("unit"), Type.Literal("root")])),
    id: Type.Optional(Type.String({ maxLength: 64 })),
    max_run_after_disconnect: Type.Optional(
      Type.String({
        maxLength: 16,
        description:
          "How long the process may run with no client attached: seconds or 10s-style; default: until it exits for a TTY, 0 otherwise",
      }),
    ),
    detachable: Type.Optional(
      Type.Boolean({
        description: "Keep the session after its websocket closes, until it exits (the Sprites clients')",
      }),
    ),
  },
  { additionalProperties: false },
);
export type ExecQuery = Static<typeof ExecQuery>;
