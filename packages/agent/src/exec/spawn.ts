import { spawn as spawnChild } from "node:child_process";
import { writeFileSync } from "node:fs";
import { type OutputStream, StreamId } from "@ums/protocol/exec";
import type { IPty } from "node-pty";
import { exitCodeForSignal } from "../util/signals.js";
import { preflight } from "./preflight.js";
import { killSession, signalSession } from "./process-session.js";
import { drainBeforeDestroy, loadNodePty } from "./pty.js";

// Starts the process of an exec session, either on pipes (stdout and stderr kept apart) or on a real PTY
// (node-pty), always as the leader of its own session and process group so that signals reach all
// of it (spec 6.3; process-session.ts). Failures to start become a message on stderr and exit code 127/126, never an exception.

export interface SpawnSpec {
  file: string;
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  uid: number;
  gid: number;
  tty: boolean;
  stdin: boolean;
  cols: number;
  rows: number;
}

export interface ChildEvents {
  output(stream: OutputStream, data: Buffer): void;
  /** Called once, after all output has been delivered. */
  exit(code: number): void;
  /** stdin accepts data again after write() returned false. */
  drain(): void;
}

export interface ChildHandle {
  /** Process id (and process group id); 0 when the process could not be started. */
  readonly pid: number;
  /** Returns false when the caller should wait for the drain event before writing more. */
  write(data: Buffer): boolean;
  endStdin(): void;
  resize(cols: number, rows: number): void;
  /** Signals the process group; returns false when no process of the group is left. */
  signal(sig: NodeJS.Signals): boolean;
  pause(): void;
  resume(): void;
}

const runningAsRoot = process.getuid?.() === 0;
const STDIN_HIGH_WATER = 4 * 1024 * 1024;

/**
 * When the unit runs out of memory the kernel must kill one of its processes, never the agent.
 * Lowering the agent's own score needs a privilege a user namespace lacks (the host tries), but
 * raising a score needs none: every process the agent starts (and what it forks) is marked
 * first in line. Best effort: a process that already exited is fine.
 */
function releaseOomProtection(pid: number | undefined): void {
  if (!pid) return;
  try {
    writeFileSync(`/proc/${pid}/oom_score_adj`, "1000");
  } catch {}
}

export function spawnProcess(spec: SpawnSpec, events: ChildEvents): ChildHandle {
  const pre = preflight(spec.file, spec.cwd, spec.env.PATH, spec);
  if (!pre.ok) return failed(spec.tty, pre.message, pre.exitCode, events);
  const resolved = { ...spec, file: pre.file, cwd: pre.cwd };
  try {
    const handle = spec.tty ? spawnPty(resolved, events) : spawnPipes(resolved, events);
    releaseOomProtection(handle.pid);
    return handle;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return failed(spec.tty, `ums: cannot start ${spec.file}: ${e.message}`, e.code === "ENOENT" ? 127 : 126, events);
  }
}

/** The session's whole process group and session; SIGKILL again until none of it is left (a fork bomb). */
function signalGroup(pid: number, sig: NodeJS.Signals): boolean {
  return sig === "SIGKILL" ? killSession(pid) : signalSession(pid, sig);
}

/** A session whose process never started: reports the message and the exit code asynchronously. */
function failed(tty: boolean, message: string, code: number, events: ChildEvents): ChildHandle {
  setImmediate(() => {
    events.output(StreamId.Stderr, Buffer.from(tty ? `${message}\r\n` : `${message}\n`));
    events.exit(code);
  });
  return {
    pid: 0,
    write: () => true,
    endStdin: () => {},
    resize: () => {},
    signal: () => false,
    pause: () => {},
    resume: () => {},
  };
}

function spawnPipes(spec: SpawnSpec, events: ChildEvents): ChildHandle {
  const ids = runningAsRoot || spec.uid !== process.getuid?.() ? { uid: spec.uid, gid: spec.gid } : {};
  const child = spawnChild(spec.file, spec.argv.slice(1), {
    argv0: spec.argv[0],
    cwd: spec.cwd,
    env: spec.env,
    ...ids,
    detached: true,
    stdio: [spec.stdin ? "pipe" : "ignore", "pipe", "pipe"],
  });
  let exitCode: number | null = null;
  let finished = false;
  let paused = false;
  let openStreams = 2;
  let lastData = Date.now();
  let exitedAt = 0;
  let timer: NodeJS.Timeout | null = null;

  const finish = () => {
    if (finished || exitCode === null) return;
    finished = true;
    if (timer) clearInterval(timer);
    child.stdout?.destroy();
    child.stderr?.destroy();
    events.exit(exitCode);
  };
  const onData = (stream: OutputStream) => (data: Buffer) => {
    lastData = Date.now();
    events.output(stream, data);
  };
  const onEnd = () => {
    openStreams -= 1;
    if (openStreams === 0) finish();
  };
  for (const [s, id] of [
    [child.stdout, StreamId.Stdout],
    [child.stderr, StreamId.Stderr],
  ] as const) {
    s?.on("data", onData(id));
    s?.once("close", onEnd);
    s?.on("error", () => {});
  }
  child.stdin?.on("error", () => {});
  child.stdin?.on("drain", () => events.drain());
  // After end() (or a failed write) no drain comes: never leave the clients' input paused.
  child.stdin?.on("close", () => events.drain());

  child.on("error", (err: NodeJS.ErrnoException) => {
    // spawn itself failed (after preflight, e.g. setuid refused): no process, no exit event.
    if (child.pid !== undefined || exitCode !== null) return;
    events.output(StreamId.Stderr, Buffer.from(`ums: cannot start ${spec.file}: ${err.message}\n`));
    exitCode = err.code === "ENOENT" ? 127 : 126;
    finish();
  });
  child.on("exit", (code, sig) => {
    exitCode = code ?? (sig ? exitCodeForSignal(sig) : 255);
    exitedAt = Date.now();
    if (openStreams === 0) return finish();
    // Normally stdout and stderr close right after the exit; a background process that inherited them
    // may keep them open, so stop waiting once they have been quiet for a while (unless we paused them).
    // Time since the exit while reading (paused time does not count: a slow client must not cost
    // the output still in the pipe, which was lost when 2 s since the exit ran out mid-drain).
    let reading = 0;
    timer = setInterval(() => {
      const now = Date.now();
      if (paused) return;
      reading += 100;
      // Quiet since the exit too: output written just before it may still be in the pipe, unread.
      if (now - Math.max(lastData, exitedAt) >= 250 || reading >= 2000) finish();
    }, 100);
  });

  return {
    get pid() {
      return child.pid ?? 0;
    },
    write: (data) => {
      const stdin = child.stdin;
      if (!stdin || stdin.destroyed || stdin.writableEnded) return true;
      stdin.write(data);
      // Ask the clients to hold off only past a generous buffer: a paused websocket is not read, so its
      // close would go unnoticed until the process reads its stdin again.
      return stdin.writableLength < STDIN_HIGH_WATER;
    },
    endStdin: () => {
      if (child.stdin && !child.stdin.writableEnded) child.stdin.end();
    },
    resize: () => {},
    signal: (sig) => signalGroup(child.pid ?? 0, sig),
    pause: () => {
      paused = true;
      child.stdout?.pause();
      child.stderr?.pause();
    },
    resume: () => {
      paused = false;
      // Quiet is counted from here: what waited in the pipe while paused comes after the resume.
      lastData = Date.now();
      child.stdout?.resume();
      child.stderr?.resume();
    },
  };
}

function spawnPty(spec: SpawnSpec, events: ChildEvents): ChildHandle {
  const pty = loadNodePty();
  const term: IPty = pty.spawn(spec.file, spec.argv.slice(1), {
    name: spec.env.TERM ?? "xterm-256color",
    cols: spec.cols,
    rows: spec.rows,
    cwd: spec.cwd,
    env: spec.env,
    encoding: null,
    ...(runningAsRoot || spec.uid !== process.getuid?.() ? { uid: spec.uid, gid: spec.gid } : {}),
  });
  // A second 'error' listener stops node-pty from rethrowing read errors other than EIO.
  (term as unknown as { on(e: string, l: (err: Error) => void): void }).on("error", () => {});
  let done = false;
  const output = (data: Buffer | string) => {
    if (!done) events.output(StreamId.Stdout, Buffer.isBuffer(data) ? data : Buffer.from(data));
  };
  term.onData(output);
  drainBeforeDestroy(term, output);
  term.onExit(({ exitCode, signal }) => {
    if (done) return;
    done = true;
    events.exit(signal ? exitCodeForSignal(signal) : exitCode);
  });
  return {
    pid: term.pid,
    write: (data) => {
      if (!done && spec.stdin) term.write(data);
      return true;
    },
    endStdin: () => {},
    resize: (cols, rows) => {
      if (done) return;
      try {
        term.resize(cols, rows);
      } catch {
        // the pty is already gone
      }
    },
    signal: (sig) => signalGroup(term.pid, sig),
    pause: () => term.pause(),
    resume: () => term.resume(),
  };
}
