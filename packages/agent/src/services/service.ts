import { readFileSync } from "node:fs";
import type { ServiceState } from "@ums/protocol";
import { StreamId } from "@ums/protocol/exec";
import { sessionDir, sessionEnv } from "../exec/environment.js";
import { descendants, type ProcessRef, signalRefs } from "../exec/process-session.js";
import { type ChildHandle, spawnProcess } from "../exec/spawn.js";
import { parseProcNetTcp } from "../ports/watch.js";
import type { SessionUser } from "../util/users.js";
import { backoffMs, nextAttempt } from "./backoff.js";
import type { ServiceDefinition } from "./definition.js";
import { emitServiceEvent } from "./events.js";
import type { ServiceLog } from "./logs.js";

// One supervised service (spec 3.2): its process (the unit user's, in its own process group, first in
// line for the OOM killer like every process the agent starts), its state, and restart with backoff
// after a crash or kill. A service with `http_port` counts as running once that port listens.

export const STOP_GRACE_MS = 10_000;
const PORT_POLL_MS = 50;

export class Service {
  status: ServiceState["status"] = "stopped";
  private child: ChildHandle | null = null;
  private gen = 0;
  private startedAt = 0;
  private error: string | undefined;
  private lastStderr = "";
  private attempt = 0;
  restartCount = 0;
  private nextRestartAt = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private exitWaiters: ((code: number) => void)[] = [];
  /** What a stop found below the process outside its group (setsid children), killed with it. */
  private stopTree: ProcessRef[] = [];
  lastExit = 0;

  constructor(
    readonly name: string,
    public def: ServiceDefinition,
    readonly log: ServiceLog,
    private readonly user: SessionUser,
  ) {}

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  get alive(): boolean {
    return this.child !== null;
  }

  state(): ServiceState {
    const s: ServiceState = { name: this.name, status: this.status, restart_count: this.restartCount };
    if (this.child && this.pid > 0) s.pid = this.pid;
    if (this.child && this.startedAt) s.started_at = new Date(this.startedAt).toISOString();
    if (this.error && (this.status === "failed" || this.status === "starting")) s.error = this.error;
    if (this.restartTimer) s.next_restart_at = new Date(this.nextRestartAt).toISOString();
    return s;
  }

  /** Starts the process now (the caller waited for `needs`); a fresh start resets the restart count. */
  spawn(fresh: boolean): void {
    if (this.child) return;
    this.clearRestart();
    if (fresh) {
      this.restartCount = 0;
      this.attempt = 0;
      this.error = undefined;
    }
    const gen = ++this.gen;
    this.status = "starting";
    this.lastStderr = "";
    const user = this.user;
    const child = spawnProcess(
      {
        file: this.def.cmd,
        argv: [this.def.cmd, ...this.def.args],
        env: sessionEnv(user, false, Object.entries(this.def.env ?? {})),
        cwd: sessionDir(user, this.def.dir),
        uid: user.uid,
        gid: user.gid,
        tty: false,
        stdin: false,
        cols: 80,
        rows: 24,
      },
      {
        output: (stream, data) => {
          if (stream === StreamId.Stderr) this.lastStderr = data.toString("utf8").trim().split("\n").pop() ?? "";
          this.log.output(stream === StreamId.Stderr ? "stderr" : "stdout", data);
        },
        exit: (code) => this.exited(gen, code),
        drain: () => {},
      },
      "node", // its pid is needed now: ums-spawn tells it later
    );
    if (child.pid <= 0) return; // the failure arrives as output + exit
    this.child = child;
    this.startedAt = Date.now();
    this.log.emit({ type: "started", timestamp: this.startedAt });
    if (typeof this.def.http_port === "number") void this.awaitPort(gen, this.def.http_port);
    else this.status = "running";
  }

  /**
   * The service is `running` once its port listens, checked every PORT_POLL_MS from one interval
   * after its start: nothing listens a moment after its spawn, and a check reads /proc (3-7 ms of
   * this thread in a booting unit, measured), which at a boot came before the agent's first answer.
   */
  private async awaitPort(gen: number, port: number): Promise<void> {
    for (;;) {
      await new Promise((r) => setTimeout(r, PORT_POLL_MS));
      if (gen !== this.gen || !this.child || this.status !== "starting") return;
      if (portListening(port)) {
        this.status = "running";
        return;
      }
    }
  }

  private exited(gen: number, code: number): void {
    this.log.flush();
    const now = Date.now();
    this.log.emit({ type: "exit", exit_code: code, timestamp: now });
    if (gen !== this.gen) return;
    if (!this.child) {
      const why = this.lastStderr || `exit code ${code}`;
      this.log.emit({ type: "error", data: `the service could not be started: ${why}`, timestamp: now });
    }
    // Whatever the service left behind in its process group goes with it; on a stop, also the
    // children that left the group (setsid) that the stop found.
    this.child?.signal("SIGKILL");
    if (this.status === "stopping") signalRefs(this.stopTree.splice(0), "SIGKILL");
    const ranMs = this.child ? now - this.startedAt : 0;
    this.child = null;
    this.lastExit = code;
    const waiters = this.exitWaiters.splice(0);
    if (this.status === "stopping" || this.status === "stopped") {
      this.status = "stopped";
      for (const w of waiters) w(code);
      return;
    }
    // A crash (or a kill from inside the unit): restart after the backoff.
    this.attempt = nextAttempt(this.attempt, ranMs);
    const delay = backoffMs(this.attempt);
    this.status = "failed";
    this.error = `exited with code ${code}${this.lastStderr ? `: ${this.lastStderr.slice(0, 500)}` : ""}`;
    this.nextRestartAt = now + delay;
    emitServiceEvent({
      type: "crashed",
      service: this.name,
      exit_code: code,
      restart_in_ms: delay,
      ...(this.lastStderr && { error: this.lastStderr.slice(0, 500) }),
    });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      this.restartCount += 1;
      this.spawn(false);
      emitServiceEvent({ type: "restarted", service: this.name, restart_count: this.restartCount });
    }, delay);
    for (const w of waiters) w(code);
  }

  /**
   * Stops the process group and the process's other descendants: SIGTERM, then SIGKILL after the
   * grace (STOP_GRACE_MS by default); whatever is left when the process exits is killed then.
   * Resolves with the exit code once the process is gone.
   */
  stop(graceMs = STOP_GRACE_MS): Promise<number> {
    this.clearRestart();
    const child = this.child;
    if (!child) {
      this.status = "stopped";
      return Promise.resolve(this.lastExit);
    }
    this.status = "stopping";
    this.log.emit({ type: "stopping", timestamp: Date.now() });
    const done = new Promise<number>((r) => this.exitWaiters.push(r));
    const tree = descendants(child.pid);
    this.stopTree.push(...tree);
    child.signal("SIGTERM");
    signalRefs(tree, "SIGTERM");
    const kill = setTimeout(() => {
      child.signal("SIGKILL");
      signalRefs(tree, "SIGKILL");
    }, graceMs);
    return done.finally(() => clearTimeout(kill));
  }

  /** Sends a signal to the service's process group; false when it is not running. */
  signal(sig: NodeJS.Signals): boolean {
    return this.child?.signal(sig) ?? false;
  }

  private clearRestart(): void {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = null;
  }
}

export function portListening(port: number): boolean {
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    try {
      if (parseProcNetTcp(readFileSync(file, "utf8")).some((s) => s.port === port)) return true;
    } catch {}
  }
  return false;
}
