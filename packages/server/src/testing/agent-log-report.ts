import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

/** What an agent logs when something went wrong (agent/src/server.ts and main.ts). */
const TROUBLE = new Set(["a request failed after its answer began", "uncaught exception", "unhandled rejection"]);

/**
 * The lines of a unit's agent.log (its PID 1's and agent's stdout and stderr, in its run dir) that
 * tell of trouble: those messages, and whatever is not one of the agent's JSON lines (a crash's
 * stack, runc's own words). At most `max` of them.
 */
export function troubleLines(log: string, max = 20): string[] {
  const out: string[] = [];
  for (const line of log.split("\n")) {
    if (line.trim() === "") continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      parsed = undefined;
    }
    // One of the agent's JSON lines (or its loader's, which have no msg): routine unless trouble.
    if (parsed !== null && typeof parsed === "object" && !TROUBLE.has(String((parsed as { msg?: unknown }).msg)))
      continue;
    out.push(line.length > 2000 ? `${line.slice(0, 2000)}…` : line);
    if (out.length >= max) break;
  }
  return out;
}

/**
 * Before a test server destroys its units: each unit's agent.log lines of trouble go to stderr,
 * which the test runner shows with the test file's output. A rare failure (an exec whose agent
 * connection broke) is otherwise gone with the unit's run dir.
 */
export async function reportAgentTrouble(runRoot: string, unitIds: readonly string[]): Promise<void> {
  for (const id of unitIds) {
    const log = await readFile(join(runRoot, id, "agent.log"), "utf8").catch(() => "");
    const lines = troubleLines(log);
    if (lines.length === 0) continue;
    process.stderr.write(`[test server] unit ${id}: its agent.log tells of trouble:\n`);
    for (const l of lines) process.stderr.write(`  ${l}\n`);
  }
}

/**
 * The last `lines` lines of the agent.log of each of the `units` most recently written units under
 * `runRoot`, headed by the unit's id: what a test that saw a unit misbehave adds to its failure.
 */
export async function recentAgentLogs(runRoot: string, units = 4, lines = 30): Promise<string> {
  const ids = await readdir(runRoot).catch(() => [] as string[]);
  const logs: { id: string; mtime: number; text: string }[] = [];
  for (const id of ids) {
    const file = join(runRoot, id, "agent.log");
    const st = await stat(file).catch(() => undefined);
    if (!st) continue;
    logs.push({ id, mtime: st.mtimeMs, text: await readFile(file, "utf8").catch(() => "") });
  }
  return logs
    .sort((a, b) => b.mtime - a.mtime)
    .slice(0, units)
    .map((l) => `unit ${l.id} agent.log:\n${l.text.trimEnd().split("\n").slice(-lines).join("\n")}`)
    .join("\n");
}

/** A pino destination that keeps the last `max` lines written (the test server's warnings). */
export class LogRing {
  private readonly lines: string[] = [];
  constructor(private readonly max = 100) {}
  write(line: string): void {
    this.lines.push(line.trimEnd());
    if (this.lines.length > this.max) this.lines.shift();
  }
  recent(): string[] {
    return [...this.lines];
  }
}
