import { Type } from "@sinclair/typebox";
import { ApiError } from "../errors.js";

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
    max_run_after_disconnect: Type.Optional(Type.String({ maxLength: 16, description: "Seconds or 10s-style" })),
  },
  { additionalProperties: false },
);

export type ExecQueryValue = {
  cmd: string[];
  path?: string;
  stdin?: boolean;
  env?: string[];
  dir?: string;
  tty?: boolean;
  cols?: number;
  rows?: number;
  user?: "unit" | "root";
  id?: string;
  max_run_after_disconnect?: string;
};

const ENV_ENTRY = /^[A-Za-z_][A-Za-z0-9_]*=/s;

/** The agent's query string for an exec request; rejects what the schema cannot say. */
export function agentExecQuery(q: ExecQueryValue, overrides: Record<string, string> = {}): string {
  if (q.cmd[0] === "") {
    throw ApiError.validation([
      "cmd: the first value is the program to run and must not be empty (e.g. ?cmd=ls&cmd=-l)",
    ]);
  }
  const bad = (q.env ?? []).filter((e) => !ENV_ENTRY.test(e));
  if (bad.length > 0) {
    throw ApiError.validation(bad.map((e) => `env: '${e.slice(0, 40)}' is not KEY=VALUE (KEY: letters, digits, _)`));
  }
  if ([...q.cmd, ...(q.env ?? []), q.path ?? "", q.dir ?? ""].some((s) => s.includes("\0"))) {
    throw ApiError.validation(["cmd: arguments, env, path and dir must not contain NUL bytes"]);
  }
  const p = new URLSearchParams();
  for (const c of q.cmd) p.append("cmd", c);
  for (const e of q.env ?? []) p.append("env", e);
  if (q.path) p.set("path", q.path);
  if (q.dir) p.set("dir", q.dir);
  if (q.user) p.set("user", q.user);
  p.set("tty", String(q.tty ?? false));
  p.set("stdin", String(q.stdin ?? false));
  if (q.cols) p.set("cols", String(q.cols));
  if (q.rows) p.set("rows", String(q.rows));
  if (q.max_run_after_disconnect) p.set("max_run_after_disconnect", q.max_run_after_disconnect);
  for (const [k, v] of Object.entries(overrides)) p.set(k, v);
  return p.toString();
}
