import { type ChildProcess, type StdioOptions, spawn } from "node:child_process";
import { toolEnv } from "../runtime/exec/host-command.js";

/** How a child process ended. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Its last stderr (up to 16 KiB), for error messages. */
  stderr: string;
  /** Set when it could not be started (ENOENT and the like). */
  spawnError?: Error;
}

/** A child process whose end is always awaited: `exit` never rejects. */
export interface Child {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly exit: Promise<ChildExit>;
  /** SIGKILL unless it has ended (safe to call any number of times). */
  kill(): void;
}

const STDERR_KEEP = 16 * 1024;

/** Starts `command` without a shell, stderr captured; `stdio[2]` is always a pipe. */
export function startChild(command: string, args: readonly string[], stdio: StdioOptions): Child {
  const io = Array.isArray(stdio) ? [...stdio] : [stdio, stdio, stdio];
  io[2] = "pipe";
  const proc = spawn(command, args, { stdio: io as StdioOptions, env: toolEnv() });
  let stderr = "";
  proc.stderr?.setEncoding("utf8");
  proc.stderr?.on("data", (s: string) => {
    stderr = (stderr + s).slice(-STDERR_KEEP);
  });
  let ended = false;
  const exit = new Promise<ChildExit>((resolve) => {
    proc.once("error", (err) => {
      // 'close' still follows an 'error' of a process that did start (a kill that failed); one
      // that could not be spawned never emits it.
      if (proc.pid === undefined) {
        ended = true;
        resolve({ code: null, signal: null, stderr: `${command}: ${err.message}`, spawnError: err });
      }
    });
    proc.once("close", (code, signal) => {
      ended = true;
      resolve({ code, signal, stderr });
    });
  });
  // Pipes we hand over may see EPIPE when the other end is killed: that is reported by exit codes.
  for (const s of [proc.stdin, proc.stdout]) s?.on("error", () => {});
  return {
    name: command,
    proc,
    exit,
    kill: () => {
      if (!ended && proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    },
  };
}

/**
 * `startChild` at the lowest CPU priority (`nice -n 19`): work in the background (a checkpoint's
 * copy to the object store) yields the CPU to the units and requests of its host.
 */
export function startBackgroundChild(command: string, args: readonly string[], stdio: StdioOptions): Child {
  return startChild("nice", ["-n", "19", command, ...args], stdio);
}

/** A one-line account of a child's failure, or undefined when it exited 0. */
export function childFailure(label: string, e: ChildExit): string | undefined {
  if (e.spawnError) return `${label}: ${e.spawnError.message}`;
  if (e.code === 0) return undefined;
  const status = e.signal ? `killed by ${e.signal}` : `exit ${e.code}`;
  const detail = e.stderr.trim().split("\n").slice(-5).join("; ");
  return `${label} failed (${status})${detail ? `: ${detail}` : ""}`;
}
