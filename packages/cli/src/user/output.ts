// How user commands print: data as a borderless table on a terminal-friendly layout, or as JSON
// with --json; errors as one line `ums: CODE: message`.

import { createRequire } from "node:module";

// cli-table3 (a CommonJS module) is loaded when a table is printed, not at every start (ums exec).
const require = createRequire(import.meta.url);

/** A table without borders, columns separated by two spaces (like kubectl and docker). */
export function table(head: string[], rows: (string | number)[][]): string {
  const Table = require("cli-table3") as typeof import("cli-table3");
  const t = new Table({
    head,
    chars: {
      top: "",
      "top-mid": "",
      "top-left": "",
      "top-right": "",
      bottom: "",
      "bottom-mid": "",
      "bottom-left": "",
      "bottom-right": "",
      left: "",
      "left-mid": "",
      mid: "",
      "mid-mid": "",
      right: "",
      "right-mid": "",
      middle: "  ",
    },
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
  });
  t.push(...rows.map((r) => r.map(String)));
  return `${t
    .toString()
    .split("\n")
    .map((l) => l.trimEnd())
    .join("\n")}\n`;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function age(date: Date | null, now = Date.now()): string {
  if (!date) return "-";
  const s = Math.max(0, Math.round((now - date.getTime()) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}
