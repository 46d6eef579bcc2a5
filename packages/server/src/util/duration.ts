/**
 * Durations as users write them: integer seconds (`30`) or a number with a unit (`500ms`, `10s`,
 * `2m`, `1h`), as DESIGN.md section 8 asks for `duration` query values. Returns milliseconds, or
 * undefined when the text is not a duration.
 */
export function parseDurationMs(text: string): number | undefined {
  const m = /^(\d{1,9})(ms|s|m|h)?$/.exec(text.trim());
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  return n * (unit === "ms" ? 1 : unit === "s" ? 1000 : unit === "m" ? 60_000 : 3_600_000);
}
