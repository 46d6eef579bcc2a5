import { readSync } from "node:fs";
import { createRequire } from "node:module";
import type * as NodePty from "node-pty";

// node-pty is a native addon, so it is not bundled: the host bind-mounts its package at
// <agent dir>/node_modules/node-pty (read-only), and it is resolved from this file's own directory
// (docs/ARCHITECTURE.md section 1: "PTY: node-pty inside the agent"). UMS_AGENT_NODE_PTY may name another location.
// It is loaded on the first TTY session only, so pipe sessions work even where it is missing.

let cached: typeof NodePty | null = null;

export function loadNodePty(): typeof NodePty {
  if (cached) return cached;
  const localRequire = createRequire(import.meta.url);
  cached = localRequire(process.env.UMS_AGENT_NODE_PTY || "node-pty") as typeof NodePty;
  return cached;
}

/**
 * node-pty (1.1, unixTerminal.js) waits 200 ms after its child exits for the terminal's read side
 * to close, then destroys it, dropping what was not read yet. On a loaded host that drops the
 * last output of a TTY command (seen in the suite: `echo got-$x; exit` lost "got-xyz"); and a
 * session whose output is paused (a slow client) loses what its process wrote before exiting.
 * So before the terminal is destroyed, what it still holds is read here and handed to `emit`.
 * The child has closed its side by then, so the kernel flushes what is pending to the reader
 * and then answers EIO (n_tty_read); EAGAIN means another process still holds the terminal.
 */
export function drainBeforeDestroy(term: NodePty.IPty, emit: (data: Buffer) => void): void {
  const t = term as unknown as { _socket?: { destroy?: (...a: unknown[]) => unknown }; _fd?: number };
  const socket = t._socket;
  const fd = t._fd;
  if (!socket || typeof socket.destroy !== "function" || typeof fd !== "number") return;
  const destroy = socket.destroy.bind(socket);
  socket.destroy = (...args: unknown[]) => {
    const buf = Buffer.allocUnsafe(64 * 1024);
    for (let i = 0; i < 1024; i++) {
      let n: number;
      try {
        n = readSync(fd, buf, 0, buf.length, null);
      } catch {
        break; // EIO: all read; EAGAIN: nothing more now; EBADF: already closed
      }
      if (n <= 0) break;
      emit(Buffer.from(buf.subarray(0, n)));
    }
    return destroy(...args);
  };
}
