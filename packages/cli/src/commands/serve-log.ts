// `ums serve` on a terminal (issue 13 part 3): pino's JSON lines turned into readable ones, and the
// first start's image build as one progress line redrawn in place. JSON stays the format when
// stderr is not a terminal (a service manager, a pipe) or with --log-format json.

import { Writable } from "node:stream";

const LEVELS: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
/** Fields every line has, or that the line's head already shows. */
const HIDDEN = new Set(["level", "time", "msg", "service", "pid", "hostname"]);

function value(v: unknown): string {
  if (typeof v === "string") return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (v !== null && typeof v === "object" && "message" in v && "type" in v) {
    // A serialized error: its message (and the first frame of its stack, for the operator).
    const err = v as { type: string; message: string; stack?: string };
    const frame = err.stack?.split("\n")[1]?.trim();
    return JSON.stringify(`${err.type}: ${err.message}${frame ? ` (${frame})` : ""}`);
  }
  return JSON.stringify(v);
}

/** One log record as `HH:MM:SS LEVEL message key=value …` (local time). */
export function formatRecord(rec: Record<string, unknown>): string {
  const time = typeof rec.time === "number" ? new Date(rec.time) : new Date();
  const hh = [time.getHours(), time.getMinutes(), time.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
  const level = (LEVELS[rec.level as number] ?? String(rec.level)).padEnd(5);
  const fields = Object.entries(rec)
    .filter(([k, v]) => !HIDDEN.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${value(v)}`);
  return [hh, level, String(rec.msg ?? ""), ...fields].join(" ");
}

/** An image build progress record (runtime/host.ts logs `image: …` with step and percent). */
export function imageProgress(rec: Record<string, unknown>): { percent: number; message: string } | null {
  if (typeof rec.msg !== "string" || !rec.msg.startsWith("image: ") || typeof rec.percent !== "number") return null;
  return { percent: rec.percent, message: rec.msg.slice("image: ".length) };
}

/** A bar of `width` cells for `percent`. */
export function bar(percent: number, width = 30): string {
  const full = Math.round((Math.max(0, Math.min(100, percent)) / 100) * width);
  return `[${"#".repeat(full)}${"-".repeat(width - full)}] ${String(Math.floor(percent)).padStart(3)}%`;
}

/**
 * A destination for pino: whole JSON lines in, readable lines out to `out`. With `tty`, image
 * progress is one line redrawn in place (cut to the terminal's width); without, one line each.
 */
export function prettyDestination(out: NodeJS.WriteStream, tty = out.isTTY === true): Writable {
  let pending = "";
  let progressShown = false;
  const emit = (line: string) => {
    let rec: Record<string, unknown>;
    try {
      rec = JSON.parse(line) as Record<string, unknown>;
    } catch {
      rec = { msg: line };
    }
    const p = imageProgress(rec);
    if (p && tty) {
      const width = Math.max(20, (out.columns || 80) - 1);
      const text = `image ${bar(p.percent)} ${p.message}`.slice(0, width);
      out.write(`\r\x1b[K${text}`);
      progressShown = true;
      return;
    }
    if (progressShown) out.write("\n");
    progressShown = false;
    out.write(`${formatRecord(rec)}\n`);
  };
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      pending += chunk.toString("utf8");
      let nl = pending.indexOf("\n");
      while (nl >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line.trim() !== "") emit(line);
        nl = pending.indexOf("\n");
      }
      done();
    },
  });
}
