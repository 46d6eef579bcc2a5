/** `90s`, `15m`, `12h`, `30d` or `2w` in ms; undefined for anything else. */
export function parseSpan(text: string): number | undefined {
  const m = /^(\d+)(s|m|h|d|w)$/.exec(text.trim());
  if (!m) return undefined;
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[
    m[2] as "s" | "m" | "h" | "d" | "w"
  ];
  const ms = Number(m[1]) * unit;
  return ms > 0 && ms <= 10 * 365 * 86_400_000 ? ms : undefined;
}
