import { constants } from "node:os";

// Signal names as accepted by the kill endpoint (spec 4.3, 6.3) and the `signal` control message
// (docs/ARCHITECTURE.md section 10): "SIGTERM", "TERM", "term" or a number ("15").

export interface SignalSpec {
  name: NodeJS.Signals;
  number: number;
}

const BY_NAME = constants.signals as Record<string, number>;

export function parseSignal(value: string): SignalSpec | null {
  const text = value.trim().toUpperCase();
  if (text === "") return null;
  if (/^\d+$/.test(text)) {
    const n = Number(text);
    for (const [name, num] of Object.entries(BY_NAME)) {
      if (num === n) return { name: name as NodeJS.Signals, number: num };
    }
    return null;
  }
  const name = text.startsWith("SIG") ? text : `SIG${text}`;
  const num = BY_NAME[name];
  if (num === undefined) return null;
  return { name: name as NodeJS.Signals, number: num };
}

/** The shell convention for a process ended by a signal: 128 + the signal number. */
export function exitCodeForSignal(signal: NodeJS.Signals | number): number {
  const n = typeof signal === "number" ? signal : (BY_NAME[signal] ?? 0);
  return 128 + n;
}
