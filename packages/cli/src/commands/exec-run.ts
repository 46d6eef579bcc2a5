// The non-TTY `ums exec`: HTTP exec (spec 4.3), the remote process's stdout and stderr bytes to
// ours, unchanged, and its exit code as ours. Without commander: the fast path (fast-exec.ts) runs
// it too.

import { Commands, encodePath } from "@ums/sdk";
import { UsageError } from "../errors.js";
import type { Resolved } from "../user/connect.js";
import { readStdin } from "../user/input.js";

export interface ExecRun {
  /** The unit's name (resolved: NAME, or the context's default). */
  unit: string;
  /** The program and its arguments (what came after `--`). */
  command: string[];
  /** `KEY=VALUE` pairs as given. */
  env: string[];
  cwd?: string | undefined;
  root?: boolean | undefined;
  timeoutMs?: number | undefined;
}

/** `--env` pairs as a map; a pair without a key is a UsageError. */
export function envPairs(pairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--env must be KEY=VALUE, got '${pair}'`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return env;
}

export async function runExec(r: Resolved, run: ExecRun): Promise<void> {
  const env = envPairs(run.env);
  // Without a terminal on stdin, the command reads what was piped in (then end of file).
  const stdin = process.stdin.isTTY ? undefined : await readStdin();
  // Straight to HTTP exec, without a GET of the unit first: a missing unit is its 404 all the same,
  // and the CLI's start stays one request (bench/cli.mjs).
  const commands = new Commands(r.client, () => encodePath`/v1/units/${run.unit}`);
  const result = await commands.run(run.command, {
    env,
    cwd: run.cwd,
    user: run.root ? "root" : undefined,
    stdin,
    timeoutMs: run.timeoutMs ?? 0,
    onOutput: (stream, bytes) => (stream === "stdout" ? process.stdout : process.stderr).write(bytes),
  });
  process.exitCode = result.exitCode;
}
