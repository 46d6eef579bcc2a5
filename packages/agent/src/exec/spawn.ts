import { spawn as spawnChild } from "node:child_process";
import { writeFileSync } from "node:fs";
import { getSystemErrorMap } from "node:util";
import { type OutputStream, StreamId } from "@ums/protocol/exec";
import type { IPty } from "node-pty";
import { exitCodeForSignal } from "../util/signals.js";
import { nativeSpawner } from "./native-spawner.js";
import { PipeChild } from "./pipe-child.js";
import { preflight } from "./preflight.js";
import { signalGroup } from "./process-session.js";
import { drainBeforeDestroy, loadNodePty } from "./pty.js";

// Starts the process of an exec session, either on pipes (stdout and stderr kept apart) or on a real PTY
// (node-pty), always as the leader of its own session and process group so that signals reach all
// of it (spec 6.3; process-session.ts). Failures to start become a message on stderr and exit code 127/126, never an exception.
// Exec sessions on pipes start through ums-spawn when the agent has it (native-spawner.ts: node's
// fork of the agent held its thread ~4 ms per exec); services, whose pid is needed at once, and
// PTYs start with node.

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
  /** Process id (and process group id); 0 when the process could not be started (or not yet). */
  readonly pid: number;
  /** The pid once the process started (ums-spawn says so a little later); 0 when it did not start. */
  readonly started: Promise<number>;
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
const OUTPUTS = { 1: StreamId.Stdout, 2: StreamId.Stderr } as const;

/** "native": through ums-spawn when it is there (else node); "node": node's spawn. */
export type SpawnWith = "native" | "node";

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

export function spawnProcess(spec: SpawnSpec, events: ChildEvents, how: SpawnWith = "native"): ChildHandle {
  const pre = preflight(spec.file, spec.cwd, spec.env.PATH, spec);
  if (!pre.ok) return failed(spec.tty, pre.message, pre.exitCode, events);
  const resolved = { ...spec, file: pre.file, cwd: pre.cwd };
  try {
    if (!spec.tty) return spawnPipes(resolved, events, how);
    const handle = spawnPty(resolved, events);
    releaseOomProtection(handle.pid);
    return handle;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = startFailure(spec.file, e.code ?? e.message);
    return failed(spec.tty, why.message, why.exitCode, events);
  }
}

/**
 * Why a process that passed the checks did not start ("text file is busy (ETXTBSY)"), and its exit
 * code as a shell's: 127 for a file not found, 126 otherwise.
 */
function startFailure(file: string, code: string): { message: string; exitCode: 126 | 127 } {
  // Looked up on failure only (rare), not built at every agent's start.
  const text = [...getSystemErrorMap().values()].find(([name]) => name === code)?.[1];
  return {
    message: `ums: cannot start ${file}: ${text ? `${text} (${code})` : code}`,
    exitCode: code === "ENOENT" ? 127 : 126,
  };
}

/** The ids a process is started with: the session's, set whenever the agent can (root) or must. */
function idsFor(spec: SpawnSpec): { uid: number; gid: number } | undefined {
  return runningAsRoot || spec.uid !== process.getuid?.() ? { uid: spec.uid, gid: spec.gid } : undefined;
}

/** A session whose process never started: reports the message and the exit code asynchronously. */
function failed(tty: boolean, message: string, code: number, events: ChildEvents): ChildHandle {
  setImmediate(() => {
    events.output(StreamId.Stderr, Buffer.from(tty ? `${message}\r\n` : `${message}\n`));
    events.exit(code);
  });
  return {
    pid: 0,
    started: Promise.resolve(0),
    write: () => true,
    endStdin: () => {},
    resize: () => {},
    signal: () => false,
    pause: () => {},
    resume: () => {},
  };
}

function spawnPipes(spec: SpawnSpec, events: ChildEvents, how: SpawnWith): ChildHandle {
  const ids = idsFor(spec);
  const pc = new PipeChild(events);
  const native = how === "native" ? nativeSpawner() : null;
  if (native) {
    native.spawn(
      { file: spec.file, argv: spec.argv, env: spec.env, cwd: spec.cwd, ids, stdin: spec.stdin },
      {
        stream: (fd, socket) => (fd === 0 ? pc.attachInput(socket) : pc.attachOutput(socket, OUTPUTS[fd])),
        started: (pid) => pc.onStarted(pid),
        // ums-spawn broke down before the process had any of its streams: node's spawn starts it.
        failed: (code, helperFault) =>
          helperFault ? startWithNode(spec, pc, ids) : pc.failed(startFailure(spec.file, code)),
        exited: (code, signal) => pc.exited(code, signal),
      },
    );
    return pc;
  }
  startWithNode(spec, pc, ids);
  return pc;
}

/** The process of `pc`, started by node's spawn (a fork of the agent). */
function startWithNode(spec: SpawnSpec, pc: PipeChild, ids: ReturnType<typeof idsFor>): void {
  const child = spawnChild(spec.file, spec.argv.slice(1), {
    argv0: spec.argv[0],
    cwd: spec.cwd,
    env: spec.env,
    ...ids,
    detached: true,
    stdio: [spec.stdin ? "pipe" : "ignore", "pipe", "pipe"],
  });
  if (child.pid !== undefined) {
    pc.onStarted(child.pid);
    releaseOomProtection(child.pid);
  }
  if (child.stdout) pc.attachOutput(child.stdout, StreamId.Stdout);
  if (child.stderr) pc.attachOutput(child.stderr, StreamId.Stderr);
  if (child.stdin) pc.attachInput(child.stdin);
  child.on("error", (err: NodeJS.ErrnoException) => {
    // spawn itself failed (after preflight, e.g. setuid refused): no process, no exit event.
    if (child.pid !== undefined) return;
    pc.failed(startFailure(spec.file, err.code ?? err.message));
  });
  child.on("exit", (code, sig) => pc.exited(code, sig));
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
    ...idsFor(spec),
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
    started: Promise.resolve(term.pid),
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
