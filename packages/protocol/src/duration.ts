// Duration values in query parameters (docs/ARCHITECTURE.md section 10: "`duration` query values are accepted both as
// integer seconds and as `10s`-style strings"). Used for max_run_after_disconnect, the kill `timeout`
// (spec 4.3) and the agent's own timing settings.

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)/y;

/**
 * Parses a duration into milliseconds: a bare non-negative number means seconds ("10", "1.5"); otherwise a
 * sequence of number+unit parts with units ms, s, m, h ("500ms", "10s", "2m", "1h30m"). Returns null for
 * anything else (empty, negative, unknown unit, trailing garbage).
 */
export function parseDuration(value: string): number | null {
  const text = value.trim();
  if (text === "") return null;
  if (/^(\d+(\.\d+)?|\.\d+)$/.test(text)) return Math.round(Number(text) * 1000);
  let total = 0;
  let pos = 0;
  PART.lastIndex = 0;
  while (pos < text.length) {
    PART.lastIndex = pos;
    const m = PART.exec(text);
    if (!m || m[1] === undefined || m[2] === undefined) return null;
    const unit = UNIT_MS[m[2]];
    if (unit === undefined) return null;
    total += Number(m[1]) * unit;
    pos = PART.lastIndex;
  }
  if (!Number.isFinite(total)) return null;
  return Math.round(total);
}

/** Formats milliseconds for messages: "1.5s", "250ms", "2m". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  return `${ms / 1000}s`;
}
