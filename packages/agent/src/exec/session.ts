import type { ExecSession } from "@ums/protocol";
import {
  closeCodeForExit,
  type ExitMessage,
  encodeExitFrame,
  encodeFrame,
  type OutputStream,
  type SessionInfoMessage,
} from "@ums/protocol/exec";
import { RateMeter } from "../util/rate.js";
import { OutputRing } from "./ring.js";
import { type ChildHandle, type SpawnSpec, spawnProcess } from "./spawn.js";

// One exec session (docs/ARCHITECTURE.md section 10, spec 2.8): a process, the clients attached to it, the recent
// output for re-attach, and the rule for what happens when the last client leaves
// (max_run_after_disconnect: 0 ends the process at once with SIGHUP, then SIGKILL after a grace; more
// keeps it running that long, waiting for a re-attach; Infinity, a TTY's default, until it exits). A
// session whose process exits with no client attached is kept, output and exit code, for a re-attach
// for at most EXITED_KEEP_MS.

/** What a session needs from a connected client (a websocket, adapted in ws.ts). */
export interface Attachment {
  sendBinary(data: Uint8Array): void;
  sendText(text: string): void;
  close(code: number, reason: string): void;
  /** Bytes queued for this client and not yet written to its socket. */
  readonly bufferedAmount: number;
  /** Stop/restart reading the client's frames (stdin backpressure). */
  pauseInput(): void;
  resumeInput(): void;
}

export interface SessionOptions {
  id: number;
  spec: SpawnSpec;
  maxRunAfterDisconnectMs: number;
  killGraceMs: number;
  ringBytes: number;
  /** Called once when the session is over and must leave the session table. */
  onRemove(session: Session): void;
}

/** How long a session that ended with no client attached stays listed, for a re-attach to see its end. */
export const EXITED_KEEP_MS = 60_000;

/** Output queued for a client above which the process's output is paused until the client catches up. */
const HIGH_WATER = 4 * 1024 * 1024;
const LOW_WATER = 1024 * 1024;

export class Session {
  readonly id: number;
  readonly command: string;
  readonly created = new Date();
  readonly tty: boolean;
  readonly workdir: string;
  cols: number;
  rows: number;
  exitCode: number | null = null;
  private lastActivity = new Date();
  private readonly clients = new Set<Attachment>();
  private readonly ring: OutputRing;
  private readonly rate = new RateMeter();
  private child: ChildHandle | null = null;
  private outputPaused = false;
  private inputPaused = false;
  private flowTimer: NodeJS.Timeout | null = null;
  private lingerTimer: NodeJS.Timeout | null = null;
  private killTimer: NodeJS.Timeout | null = null;
  private removed = false;
  private readonly exitWaiters: ((code: number) => void)[] = [];

  constructor(private readonly opts: SessionOptions) {
    this.id = opts.id;
    this.command = opts.spec.argv.join(" ");
    this.tty = opts.spec.tty;
    this.workdir = opts.spec.cwd;
    this.cols = opts.spec.cols;
    this.rows = opts.spec.rows;
    this.ring = new OutputRing(opts.ringBytes);
  }

  /** Starts the process; `owner` is attached first so it sees everything from the first byte. */
  start(owner: Attachment): void {
    this.attach(owner, true);
    this.child = spawnProcess(this.opts.spec, {
      output: (stream, data) => this.onOutput(stream, data),
      exit: (code) => this.onExit(code),
      drain: () => this.resumeInputs(),
    });
  }

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  /** The pid once the process started (0: it did not); exec processes report it shortly after start(). */
  startedPid(): Promise<number> {
    return this.child?.started ?? Promise.resolve(0);
  }

  get attachedCount(): number {
    return this.clients.size;
  }

  get isActive(): boolean {
    return this.exitCode === null;
  }

  /** Whether the session may outlive its clients (and so counts against the agent's cap). */
  get detachable(): boolean {
    return this.opts.maxRunAfterDisconnectMs > 0;
  }

  info(isOwner: boolean): SessionInfoMessage {
    return {
      type: "session_info",
      session_id: this.id,
      command: this.command,
      created: this.created.toISOString(),
      cols: this.cols,
      rows: this.rows,
      tty: this.tty,
      is_owner: isOwner,
    };
  }

  listItem(): ExecSession {
    return {
      id: this.id,
      command: this.command,
      created: this.created.toISOString(),
      is_active: this.isActive,
      last_activity: this.lastActivity.toISOString(),
      tty: this.tty,
      workdir: this.workdir,
      bytes_per_second: this.rate.perSecond(),
    };
  }

  /**
   * Adds a client: session_info first, then (for a re-attach) the buffered output, then live output. A
   * client attaching to a session whose process already exited gets the replay and the exit, and the
   * session is then removed.
   */
  attach(client: Attachment, isOwner: boolean): void {
    client.sendText(JSON.stringify(this.info(isOwner)));
    if (!isOwner) {
      for (const chunk of this.ring.snapshot()) client.sendBinary(this.frame(chunk.stream, chunk.data));
    }
    if (this.exitCode !== null) {
      this.sendExit(client, this.exitCode);
      this.remove();
      return;
    }
    this.clients.add(client);
    if (this.inputPaused) client.pauseInput();
    if (this.lingerTimer) {
      clearTimeout(this.lingerTimer);
      this.lingerTimer = null;
    }
  }

  detach(client: Attachment): void {
    if (!this.clients.delete(client)) return;
    if (this.clients.size > 0 || this.exitCode !== null) {
      this.checkFlow();
      return;
    }
    // No client left: the process must not be held back by output nobody reads.
    this.setOutputPaused(false);
    if (this.opts.maxRunAfterDisconnectMs === Number.POSITIVE_INFINITY) return;
    if (this.opts.maxRunAfterDisconnectMs > 0) {
      this.lingerTimer = setTimeout(() => {
        this.lingerTimer = null;
        if (this.exitCode === null) this.hangUp();
        else this.remove();
      }, this.opts.maxRunAfterDisconnectMs);
    } else {
      this.hangUp();
    }
  }

  /** stdin data from any attached client (raw bytes for a TTY, the payload of a stream-0 frame otherwise). */
  input(data: Buffer): void {
    if (!this.child || this.exitCode !== null) return;
    this.lastActivity = new Date();
    if (!this.child.write(data)) this.pauseInputs();
  }

  endInput(): void {
    this.child?.endStdin();
  }

  resize(cols: number, rows: number): void {
    if (!this.tty) return;
    this.cols = cols;
    this.rows = rows;
    this.child?.resize(cols, rows);
  }

  /** Sends a signal to the session's process group; false when no process is left to receive it. */
  signal(sig: NodeJS.Signals): boolean {
    if (this.exitCode !== null || !this.child) return false;
    return this.child.signal(sig);
  }

  /** Resolves with the exit code, or null when the process is still running after `ms`. */
  waitExit(ms: number): Promise<number | null> {
    if (this.exitCode !== null) return Promise.resolve(this.exitCode);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const i = this.exitWaiters.indexOf(done);
        if (i >= 0) this.exitWaiters.splice(i, 1);
        resolve(null);
      }, ms);
      const done = (code: number) => {
        clearTimeout(timer);
        resolve(code);
      };
      this.exitWaiters.push(done);
    });
  }

  /** Ends the process as when its last client left: SIGHUP to the group, SIGKILL after the grace. */
  hangUp(): void {
    if (this.exitCode !== null || this.killTimer) return;
    this.signal("SIGHUP");
    this.killTimer = setTimeout(() => {
      this.killTimer = null;
      this.signal("SIGKILL");
    }, this.opts.killGraceMs);
  }

  private frame(stream: OutputStream, data: Buffer): Uint8Array {
    return this.tty ? data : encodeFrame(stream, data);
  }

  private onOutput(stream: OutputStream, data: Buffer): void {
    this.lastActivity = new Date();
    this.rate.add(data.length);
    this.ring.push(stream, data);
    if (this.clients.size === 0) return;
    const frame = this.frame(stream, data);
    for (const c of this.clients) c.sendBinary(frame);
    this.checkFlow();
  }

  private onExit(code: number): void {
    if (this.exitCode !== null) return;
    this.exitCode = code;
    this.lastActivity = new Date();
    if (this.killTimer) {
      clearTimeout(this.killTimer);
      this.killTimer = null;
    }
    if (this.flowTimer) {
      clearInterval(this.flowTimer);
      this.flowTimer = null;
    }
    for (const w of this.exitWaiters.splice(0)) w(code);
    const hadClients = this.clients.size > 0;
    for (const c of [...this.clients]) this.sendExit(c, code);
    this.clients.clear();
    // Without a client the exit is kept (with the output ring) for a re-attach, within the
    // re-attach window and for at most EXITED_KEEP_MS.
    if (hadClients || !this.detachable) {
      this.remove();
      return;
    }
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.lingerTimer = setTimeout(
      () => {
        this.lingerTimer = null;
        this.remove();
      },
      Math.min(EXITED_KEEP_MS, this.opts.maxRunAfterDisconnectMs),
    );
  }

  /** Leaves the table now if no client is attached and the process has exited (after a kill). */
  discardIfDone(): void {
    if (this.exitCode !== null && this.clients.size === 0) this.remove();
  }

  /** TTY: {"type":"exit"} then close; pipes: the two-byte exit frame then close (docs/ARCHITECTURE.md section 10). */
  private sendExit(client: Attachment, code: number): void {
    const exit: ExitMessage = { type: "exit", exit_code: code };
    if (this.tty) client.sendText(JSON.stringify(exit));
    else client.sendBinary(encodeExitFrame(code));
    client.close(closeCodeForExit(code), code === 0 ? "" : `exit code ${code}`);
  }

  private remove(): void {
    if (this.removed) return;
    this.removed = true;
    if (this.lingerTimer) {
      clearTimeout(this.lingerTimer);
      this.lingerTimer = null;
    }
    this.opts.onRemove(this);
  }

  // Output flow control: a client that cannot keep up pauses the process's output (the kernel then
  // blocks the writer) instead of growing the agent's memory without bound.
  private checkFlow(): void {
    let max = 0;
    for (const c of this.clients) max = Math.max(max, c.bufferedAmount);
    if (!this.outputPaused && max > HIGH_WATER) this.setOutputPaused(true);
    else if (this.outputPaused && max < LOW_WATER) this.setOutputPaused(false);
  }

  private setOutputPaused(paused: boolean): void {
    if (paused === this.outputPaused) return;
    this.outputPaused = paused;
    if (paused) {
      this.child?.pause();
      this.flowTimer ??= setInterval(() => this.checkFlow(), 20);
    } else {
      if (this.flowTimer) clearInterval(this.flowTimer);
      this.flowTimer = null;
      this.child?.resume();
    }
  }

  private pauseInputs(): void {
    if (this.inputPaused) return;
    this.inputPaused = true;
    for (const c of this.clients) c.pauseInput();
  }

  private resumeInputs(): void {
    if (!this.inputPaused) return;
    this.inputPaused = false;
    for (const c of this.clients) c.resumeInput();
  }

  /** Called when the agent shuts down: end the process now. */
  terminate(): void {
    this.hangUp();
  }
}
