import { parseDuration } from "@ums/protocol/duration";
import { isValidSize } from "@ums/protocol/exec";

// Query parameters of a new exec websocket (docs/ARCHITECTURE.md section 10; spec 4.3 for the shared HTTP exec ones):
// cmd (repeatable, required), path, tty, stdin, cols, rows, env (repeatable KEY=VALUE), dir, user,
// max_run_after_disconnect, detachable. Unknown parameters (e.g. the public clients' `cc`) are ignored.
// A TTY session outlives its websocket until it exits unless `max_run_after_disconnect` says otherwise
// (the spec's black-box default); a non-TTY one ends with its last client unless asked to stay.

export interface ExecRequest {
  argv: string[];
  /** Executable to run; defaults to argv[0]. Looked up in the session's PATH when it has no slash. */
  path: string;
  tty: boolean;
  /** Whether stdin from clients is forwarded; non-TTY sessions without it read /dev/null. */
  stdin: boolean;
  cols: number;
  rows: number;
  env: [string, string][];
  dir: string | null;
  user: string | null;
  /**
   * 0: end the process (SIGHUP, then SIGKILL after the grace) as soon as the last client leaves;
   * Infinity: let it run until it exits.
   */
  maxRunAfterDisconnectMs: number;
  /** Port notifications on this websocket (default true); the host's HTTP exec turns them off. */
  ports: boolean;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; errors: string[] };

export const DEFAULT_COLS = 80;
export const DEFAULT_ROWS = 24;

export function parseBool(value: string | null): boolean | null | undefined {
  if (value === null) return undefined;
  const v = value.trim().toLowerCase();
  if (v === "" || v === "true" || v === "1" || v === "yes" || v === "on") return true;
  if (v === "false" || v === "0" || v === "no" || v === "off") return false;
  return null;
}

export function parseExecQuery(q: URLSearchParams): Parsed<ExecRequest> {
  const errors: string[] = [];
  const argv = q.getAll("cmd");
  if (argv.length === 0) errors.push("cmd is required (repeat it for each argument)");
  else if (argv[0] === "") errors.push("cmd: the first value (the command) must not be empty");
  if (argv.some((a) => a.includes("\0"))) errors.push("cmd: values must not contain NUL bytes");

  const pathParam = q.get("path");
  if (pathParam !== null && (pathParam === "" || pathParam.includes("\0"))) errors.push("path must be non-empty");

  const tty = parseBool(q.get("tty"));
  if (tty === null) errors.push("tty must be true or false");
  const stdin = parseBool(q.get("stdin"));
  if (stdin === null) errors.push("stdin must be true or false");
  const ports = parseBool(q.get("ports"));
  if (ports === null) errors.push("ports must be true or false");

  const cols = parseSize(q.get("cols"), DEFAULT_COLS, "cols", errors);
  const rows = parseSize(q.get("rows"), DEFAULT_ROWS, "rows", errors);

  const env: [string, string][] = [];
  for (const item of q.getAll("env")) {
    const eq = item.indexOf("=");
    if (eq <= 0 || item.includes("\0")) {
      errors.push(`env: expected KEY=VALUE, got ${JSON.stringify(item)}`);
      continue;
    }
    env.push([item.slice(0, eq), item.slice(eq + 1)]);
  }

  const dir = q.get("dir");
  if (dir?.includes("\0")) errors.push("dir must not contain NUL bytes");

  const detachable = parseBool(q.get("detachable"));
  if (detachable === null) errors.push("detachable must be true or false");
  const isTty = tty ?? false;
  let maxRun = isTty || detachable ? Number.POSITIVE_INFINITY : 0;
  const mrad = q.get("max_run_after_disconnect");
  if (mrad !== null && mrad !== "") {
    const ms = parseDuration(mrad);
    if (ms === null)
      errors.push(`max_run_after_disconnect: expected seconds or a duration like 10s or 2m, got ${mrad}`);
    else maxRun = ms;
  }

  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: {
      argv,
      path: pathParam ?? (argv[0] as string),
      tty: isTty,
      stdin: stdin ?? isTty,
      cols,
      rows,
      env,
      dir: dir === "" ? null : dir,
      user: q.get("user"),
      maxRunAfterDisconnectMs: maxRun,
      ports: ports ?? true,
    },
  };
}

function parseSize(value: string | null, dflt: number, name: string, errors: string[]): number {
  if (value === null || value === "") return dflt;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!isValidSize(n)) {
    errors.push(`${name} must be an integer between 1 and 65535, got ${JSON.stringify(value)}`);
    return dflt;
  }
  return n;
}
