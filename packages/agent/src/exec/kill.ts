import type { ServerResponse } from "node:http";
import { formatDuration, parseDuration } from "@ums/protocol/duration";
import { sendJson, validation } from "../http/respond.js";
import { parseSignal } from "../util/signals.js";
import type { Session } from "./session.js";

// POST /exec/{id}/kill?signal=SIGTERM&timeout=10 (spec 4.3) answers with the NDJSON stream of spec 6.3:
// signal → exited | (timeout → SIGKILL → killed) → complete {exit_code}; error for failures. Each event
// is written as it happens (docs/ARCHITECTURE.md section 10).

/** How long to wait for the process to go after SIGKILL before reporting an error. */
const AFTER_SIGKILL_MS = 5000;

export interface KillRequest {
  signal: NodeJS.Signals;
  timeoutMs: number;
}

export function parseKillQuery(q: URLSearchParams): { ok: true; value: KillRequest } | { ok: false; errors: string[] } {
  const errors: string[] = [];
  const sigText = q.get("signal") ?? "SIGTERM";
  const sig = parseSignal(sigText === "" ? "SIGTERM" : sigText);
  if (!sig) errors.push(`signal: unknown signal ${JSON.stringify(sigText)}`);
  const toText = q.get("timeout");
  let timeoutMs = 10_000;
  if (toText !== null && toText !== "") {
    const ms = parseDuration(toText);
    if (ms === null) errors.push(`timeout: expected seconds or a duration like 10s, got ${JSON.stringify(toText)}`);
    else timeoutMs = ms;
  }
  if (errors.length > 0 || !sig) return { ok: false, errors };
  return { ok: true, value: { signal: sig.name, timeoutMs } };
}

export async function killSession(session: Session, q: URLSearchParams, res: ServerResponse): Promise<void> {
  const parsed = parseKillQuery(q);
  if (!parsed.ok) return sendJson(res, 400, validation(parsed.errors));
  const { signal, timeoutMs } = parsed.value;

  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  res.flushHeaders();
  const event = (obj: Record<string, unknown>) => {
    if (!res.writableEnded) res.write(`${JSON.stringify(obj)}\n`);
  };
  try {
    if (session.exitCode !== null) {
      event({ type: "exited", message: `process had already exited with code ${session.exitCode}` });
      event({ type: "complete", exit_code: session.exitCode });
      return;
    }
    const pid = await session.startedPid();
    if (!session.signal(signal)) {
      // The group is gone; the exit may not have been processed yet.
      const code = await session.waitExit(1000);
      if (code === null) {
        event({ type: "error", message: `could not send ${signal} to process group ${pid}` });
        return;
      }
      event({ type: "exited", message: `process exited with code ${code}` });
      event({ type: "complete", exit_code: code });
      return;
    }
    event({ type: "signal", message: `sent ${signal} to process group ${pid}`, signal, pid });
    let code = await session.waitExit(timeoutMs);
    if (code !== null) {
      event({ type: "exited", message: `process exited with code ${code}` });
      event({ type: "complete", exit_code: code });
      return;
    }
    event({
      type: "timeout",
      message: `process group ${pid} still running ${formatDuration(timeoutMs)} after ${signal}; sending SIGKILL`,
    });
    session.signal("SIGKILL");
    code = await session.waitExit(AFTER_SIGKILL_MS);
    if (code === null) {
      event({ type: "error", message: `process group ${pid} may not have terminated after SIGKILL` });
      return;
    }
    event({ type: "killed", message: `process group ${pid} killed with SIGKILL` });
    event({ type: "complete", exit_code: code });
  } catch (err) {
    event({ type: "error", message: `kill failed: ${(err as Error).message}` });
  } finally {
    res.end();
    // Killed on purpose: a detached session is not kept for a re-attach.
    session.discardIfDone();
  }
}
