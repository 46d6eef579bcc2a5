import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { getSystemErrorName } from "node:util";
import type { AgentConfig } from "../config.js";
import { privateRunSubdir } from "../util/run-dir.js";
import { parseSignal } from "../util/signals.js";
import { readStat } from "./process-session.js";

// The agent's side of ums-spawn (native/spawner.c: why, and its protocol). Exec sessions start their
// processes through it; spawn.ts uses node's spawn whenever it is missing, not yet up or gone.
//
// The helper connects one stream per descriptor of the new process to a Unix socket of the agent's,
// in a 0700 directory of its own (the fs worker's way: no other user of the unit can reach it), so
// the process reads and writes sockets the agent holds, as with node's spawn, with no copy between.

/** What ums-spawn says of one process, in this order: its streams (any time), started or failed, exited. */
export interface NativeChildEvents {
  /** A stream of the process: fd 0 (its stdin, only when asked for), 1 or 2. */
  stream(fd: 0 | 1 | 2, socket: Socket): void;
  started(pid: number): void;
  /**
   * The process was not started: errno's name (ENOENT, EACCES…); no exited follows. `helperFault`:
   * ums-spawn could not connect the process's streams (its socket was taken away) and did not start
   * it, nor did any of its streams reach the agent: the process may be started another way.
   */
  failed(code: string, helperFault: boolean): void;
  exited(code: number | null, signal: NodeJS.Signals | null): void;
}

export interface NativeSpawnRequest {
  file: string;
  argv: readonly string[];
  env: Record<string, string>;
  cwd: string;
  /** Set these ids in the child (setgroups(0), setgid, setuid); else it keeps the agent's. */
  ids?: { uid: number; gid: number } | undefined;
  /** The process's stdin is a stream of the agent's (else /dev/null). */
  stdin: boolean;
}

enum Reply {
  Ready = 0,
  Started = 1,
  Failed = 2,
  Exited = 3,
}
const F_STDIN = 1;
const F_SETIDS = 2;
/** A FAILED reply's stage: connecting a stream to the agent's socket (native/spawner.c). */
const STAGE_CONNECT = 1;

/** The frame of one request (native/spawner.c, "Request"). */
export function encodeRequest(id: number, r: NativeSpawnRequest): Buffer {
  const strings = [r.file, r.cwd, ...r.argv, ...Object.entries(r.env).map(([k, v]) => `${k}=${v}`)];
  const parts = strings.map((s) => Buffer.from(`${s}\0`, "utf8"));
  const head = Buffer.alloc(28);
  const flags = (r.stdin ? F_STDIN : 0) | (r.ids ? F_SETIDS : 0);
  const words = [id, flags, r.ids?.uid ?? 0, r.ids?.gid ?? 0, r.argv.length, Object.keys(r.env).length];
  for (const [i, w] of words.entries()) head.writeUInt32LE(w >>> 0, 4 + 4 * i);
  const frame = Buffer.concat([head, ...parts]);
  frame.writeUInt32LE(frame.length - 4, 0);
  return frame;
}

/** A wait(2) status as node reports a child's exit: a code, or the signal that ended it. */
export function decodeWaitStatus(status: number): { code: number | null; signal: NodeJS.Signals | null } {
  const sig = status & 0x7f;
  if (sig === 0) return { code: (status >> 8) & 0xff, signal: null };
  return { code: null, signal: parseSignal(String(sig))?.name ?? "SIGKILL" };
}

type Pending = { events: NativeChildEvents; streams: number; readonly expected: number };

export class NativeSpawner {
  private readonly dir: string;
  private readonly sockPath: string;
  private readonly listener: Server;
  private helper: ChildProcess | null = null;
  private nextId = 1;
  /** Requests by id until ums-spawn answers started or failed. */
  private readonly replies = new Map<number, NativeChildEvents>();
  /** Requests by id until all of their streams arrived (or they failed). */
  private readonly streams = new Map<number, Pending>();
  private readonly running = new Map<number, NativeChildEvents>();
  private input = Buffer.alloc(0);
  private closed = false;
  /** Takes no new requests (its socket is gone); ends once what it started has ended. */
  private retired = false;
  private up = false;

  /** Starts ums-spawn (the binary at `binary`); it takes requests once it said it is up (`ready`). */
  constructor(
    private readonly binary: string,
    runDir: string,
    private readonly onGone: (reason: string) => void,
  ) {
    this.dir = privateRunSubdir(runDir, ".spawn-");
    this.sockPath = join(this.dir, "s");
    this.listener = createServer((s) => this.accepted(s));
    this.listener.on("error", (err) => this.gone(`its socket failed: ${err.message}`));
    this.listener.listen(this.sockPath, () => this.startHelper());
  }

  /** It said it is up and is not gone since: until then spawn.ts starts processes with node's spawn. */
  get ready(): boolean {
    return this.up && !this.closed && !this.retired;
  }

  /** Not gone: up, or on its way. */
  get alive(): boolean {
    return !this.closed && !this.retired;
  }

  spawn(request: NativeSpawnRequest, events: NativeChildEvents): void {
    const id = this.nextId;
    this.nextId = this.nextId >= 0x7fffffff ? 1 : this.nextId + 1;
    this.replies.set(id, events);
    const streams = request.stdin ? 3 : 2;
    this.streams.set(id, { events, streams, expected: streams });
    this.helper?.stdin?.write(encodeRequest(id, request));
  }

  close(): void {
    this.gone("the agent is stopping");
  }

  private startHelper(): void {
    if (this.closed) return;
    const helper = spawn(this.binary, [this.sockPath], { stdio: ["pipe", "pipe", "inherit"] });
    this.helper = helper;
    helper.on("error", (err) => this.gone(`it could not start: ${err.message}`));
    helper.on("exit", (code, signal) => this.gone(`it exited (${signal ?? `code ${code}`})`));
    helper.stdin?.on("error", () => {});
    helper.stdout?.on("data", (chunk: Buffer) => this.onReplies(chunk));
  }

  private onReplies(chunk: Buffer): void {
    let buf = this.input.length ? Buffer.concat([this.input, chunk]) : chunk;
    while (buf.length >= 16) {
      const id = buf.readUInt32LE(0);
      const kind = buf.readUInt32LE(4);
      const a = buf.readInt32LE(8);
      const b = buf.readInt32LE(12);
      buf = buf.subarray(16);
      if (kind === Reply.Ready) {
        this.up = true;
      } else if (kind === Reply.Started) {
        const ev = this.replies.get(id);
        this.replies.delete(id);
        if (!ev) continue;
        this.running.set(a, ev);
        ev.started(a);
      } else if (kind === Reply.Failed) {
        const ev = this.replies.get(id);
        const untouched = this.untouched(id);
        this.replies.delete(id);
        this.streams.delete(id); // streams still to come are closed as they arrive
        const code = a > 0 ? getSystemErrorName(-a) : "EIO";
        if (b !== STAGE_CONNECT) {
          ev?.failed(code, false);
          continue;
        }
        // It cannot reach the agent's socket: root in the unit removed it (an `rm -rf /run/*`), or
        // /dev/null. Every later request would fail the same way: this helper takes no more (the
        // next exec starts a new one, nativeSpawner) and this process may still start through node.
        // It stays until the processes it started have ended, to report how they did.
        ev?.failed(code, untouched);
        this.retire(`it cannot reach the agent's socket (${code}): was its directory removed?`);
      } else if (kind === Reply.Exited) {
        const ev = this.running.get(a);
        this.running.delete(a);
        const { code, signal } = decodeWaitStatus(b);
        ev?.exited(code, signal);
      }
    }
    this.input = Buffer.from(buf);
    if (this.retired && this.replies.size === 0 && this.running.size === 0)
      this.gone("retired, with nothing left to report");
  }

  private retire(reason: string): void {
    if (this.retired || this.closed) return;
    this.retired = true;
    this.onGone(reason);
  }

  /** A stream from ums-spawn: its 8-byte header (request id, descriptor), then the process's bytes. */
  private accepted(socket: Socket): void {
    socket.on("error", () => {});
    const readHeader = () => {
      const header = socket.read(8) as Buffer | null;
      if (header === null) return void socket.once("readable", readHeader);
      if (header.length < 8) return void socket.destroy(); // it ended first: the rest of its bytes
      const id = header.readUInt32LE(0);
      const fd = header.readUInt32LE(4);
      const p = this.streams.get(id);
      if (!p || fd > 2) return void socket.destroy();
      p.streams -= 1;
      if (p.streams === 0) this.streams.delete(id);
      p.events.stream(fd as 0 | 1 | 2, socket);
    };
    readHeader();
  }

  /** No stream of request `id` has reached the agent yet (a process started another way gets its own). */
  private untouched(id: number): boolean {
    const p = this.streams.get(id);
    return p !== undefined && p.streams === p.expected;
  }

  private gone(reason: string): void {
    if (this.closed) return;
    const told = this.retired;
    this.closed = true;
    this.listener.close();
    rmSync(this.dir, { recursive: true, force: true });
    if (this.helper && this.helper.exitCode === null) this.helper.kill("SIGKILL");
    // Requests it never answered fail (EIO), and are not started another way: it may have started one
    // just before it went. Processes it started run on as the children of the unit's init, which
    // reaps them: their exit status is lost with ums-spawn, but not when they end.
    const unanswered = [...this.replies.values()];
    for (const [pid, ev] of this.running) watchOrphan(pid, ev);
    this.replies.clear();
    this.running.clear();
    this.streams.clear();
    if (!told) this.onGone(reason);
    for (const ev of unanswered) ev.failed("EIO", false);
  }
}

let spawner: NativeSpawner | null = null;
let spawnerSetup: {
  binary: string;
  runDir: string;
  log: (msg: string, fields: Record<string, unknown>) => void;
} | null = null;
let spawnerRestartAt = 0;

/**
 * Starts ums-spawn for the exec sessions after `delayMs`: its start is a fork of the agent's node,
 * which should not hold up a boot's first answers (until it is up, exec starts processes with node's
 * spawn, as it does without its binary next to the agent's entry or with config.spawner "node").
 * When it dies it is started again at the next exec, at most once a second.
 */
export function startNativeSpawner(
  entry: string,
  config: Pick<AgentConfig, "runDir" | "spawner">,
  log: (msg: string, fields: Record<string, unknown>) => void,
  delayMs = 0,
): boolean {
  const runDir = config.runDir;
  const binary = config.spawner === "node" ? null : spawnerBinary(entry);
  if (!binary) return false;
  spawnerSetup = { binary, runDir, log };
  // Nor sooner through an exec (nativeSpawner): a boot's first exec paid for that start.
  spawnerRestartAt = Date.now() + delayMs;
  setTimeout(() => nativeSpawner(), delayMs).unref();
  return true;
}

export function stopNativeSpawner(): void {
  spawnerSetup = null;
  spawner?.close();
}

/** ums-spawn when it is up; null while it starts (or cannot), when exec uses node's spawn. */
export function nativeSpawner(): NativeSpawner | null {
  if (spawner?.ready) return spawner;
  if (spawner?.alive) return null;
  const setup = spawnerSetup;
  if (!setup || Date.now() < spawnerRestartAt) return null;
  spawnerRestartAt = Date.now() + 1000;
  try {
    spawner = new NativeSpawner(setup.binary, setup.runDir, (reason) => {
      if (spawnerSetup) setup.log("ums-spawn is gone; exec starts processes with node until it is back", { reason });
    });
  } catch (err) {
    setup.log("ums-spawn could not start; exec starts processes with node", { error: (err as Error).message });
    spawner = null;
  }
  return null;
}

/** Reports an orphan's end (code 255: unknown) once it is gone or a zombie, looking every 200 ms. */
function watchOrphan(pid: number, ev: NativeChildEvents): void {
  const timer = setInterval(() => {
    if (readStat(pid) !== null) return;
    clearInterval(timer);
    ev.exited(255, null);
  }, 200);
}

/** Where ums-spawn is: beside the agent's entry point (the build puts it in dist/). */
export function spawnerBinary(entry: string): string | null {
  const file = join(entry, "..", "ums-spawn");
  return existsSync(file) ? file : null;
}
