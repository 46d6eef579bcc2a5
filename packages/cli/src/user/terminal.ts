// Connects the local terminal to an exec websocket (spec 4.3 TTY sessions): raw mode, keystrokes
// in, output out, window size changes forwarded, and a detach key that leaves the session running.

import type { ExecConnection } from "@ums/sdk";

/** Ctrl-\ (FS, 0x1c): the hosted CLI's detach key. */
export const DETACH_KEY = 0x1c;

export type TerminalEnd = { kind: "exit"; code: number } | { kind: "detached" } | { kind: "lost" };

export interface TerminalOpts {
  /** Watch for Ctrl-\ in the input and detach on it (console, attach). */
  detachKey?: boolean;
}

/** The size to open a TTY session with: the local terminal's, else 80x24. */
export function terminalSize(): { cols: number; rows: number } {
  return { cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 };
}

export function pipeTerminal(conn: ExecConnection, opts: TerminalOpts = {}): Promise<TerminalEnd> {
  const stdin = process.stdin;
  const raw = stdin.isTTY === true;
  let detached = false;

  const onInput = (chunk: Buffer) => {
    const at = opts.detachKey ? chunk.indexOf(DETACH_KEY) : -1;
    if (at < 0) return conn.write(chunk);
    if (at > 0) conn.write(chunk.subarray(0, at));
    detached = true;
    conn.detach();
  };
  const onEnd = () => conn.end();
  const onResize = () => {
    const { cols, rows } = terminalSize();
    conn.resize(cols, rows);
  };
  const onOutput = (_stream: "stdout" | "stderr", bytes: Buffer) => {
    (_stream === "stdout" ? process.stdout : process.stderr).write(bytes);
  };

  if (raw) stdin.setRawMode(true);
  stdin.on("data", onInput);
  stdin.on("end", onEnd);
  stdin.resume();
  process.stdout.on("resize", onResize);
  conn.on("data", onOutput);

  return conn.exit.then((code) => {
    stdin.off("data", onInput);
    stdin.off("end", onEnd);
    process.stdout.off("resize", onResize);
    if (raw) stdin.setRawMode(false);
    stdin.pause();
    if (detached) return { kind: "detached" };
    if (code === null) return { kind: "lost" };
    return { kind: "exit", code };
  });
}
