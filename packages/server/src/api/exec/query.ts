import { ExecQuery } from "@ums/protocol";
import { ApiError } from "../errors.js";

export { ExecQuery };

/** A validated exec query (spec 4.3). */
export type ExecQueryValue = ExecQuery;

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
  if (q.detachable !== undefined) p.set("detachable", String(q.detachable));
  for (const [k, v] of Object.entries(overrides)) p.set(k, v);
  return p.toString();
}
