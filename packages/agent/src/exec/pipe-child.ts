import type { Readable, Writable } from "node:stream";
import { type OutputStream, StreamId } from "@ums/protocol/exec";
import { exitCodeForSignal } from "../util/signals.js";
import { signalGroup } from "./process-session.js";
import type { ChildEvents, ChildHandle } from "./spawn.js";

const STDIN_HIGH_WATER = 4 * 1024 * 1024;

/**
 * A process on pipes (stdout and stderr kept apart), whichever way it was started: node's spawn
 * hands over its streams at once, ums-spawn (native-spawner.ts) as they connect, possibly after the
 * process started or even exited. Input written before stdin is there waits for it; a pause holds
 * streams that come later too; signals sent before the pid is known are sent when it is.
 */
export class PipeChild implements ChildHandle {
  private pidValue = 0;
  private stdin: Writable | null = null;
  private readonly outputs: Readable[] = [];
  private earlyInput: Buffer[] = [];
  private stdinEnded = false;
  private earlySignals: NodeJS.Signals[] = [];
  private exitCode: number | null = null;
  private finished = false;
  private paused = false;
  private openStreams = 2;
  private lastData = Date.now();
  private exitedAt = 0;
  private timer: NodeJS.Timeout | null = null;

  private resolveStarted: (pid: number) => void = () => {};
  readonly started = new Promise<number>((resolve) => {
    this.resolveStarted = resolve;
  });

  constructor(private readonly events: ChildEvents) {}

  get pid(): number {
    return this.pidValue;
  }

  onStarted(pid: number): void {
    this.pidValue = pid;
    this.resolveStarted(pid);
    for (const sig of this.earlySignals.splice(0)) this.signal(sig);
  }

  /** The process did not start: its message on stderr, then the exit code (126 or 127). */
  failed({ message, exitCode }: { message: string; exitCode: number }): void {
    if (this.exitCode !== null) return;
    this.resolveStarted(0);
    this.events.output(StreamId.Stderr, Buffer.from(`${message}\n`));
    this.exitCode = exitCode;
    this.finish();
  }

  attachOutput(stream: Readable, id: OutputStream): void {
    if (this.finished) return void stream.destroy();
    this.outputs.push(stream);
    stream.on("data", (data: Buffer) => {
      this.lastData = Date.now();
      this.events.output(id, data);
    });
    stream.once("close", () => {
      this.openStreams -= 1;
      if (this.openStreams === 0) this.finish();
    });
    stream.on("error", () => {});
    if (this.paused) stream.pause();
  }

  attachInput(stream: Writable): void {
    if (this.finished) return void stream.destroy();
    this.stdin = stream;
    stream.on("error", () => {});
    stream.on("drain", () => this.events.drain());
    // After end() (or a failed write) no drain comes: never leave the clients' input paused.
    stream.on("close", () => this.events.drain());
    for (const data of this.earlyInput.splice(0)) stream.write(data);
    if (this.stdinEnded) stream.end();
  }

  exited(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exitCode !== null) return;
    this.resolveStarted(this.pidValue);
    this.exitCode = code ?? (signal ? exitCodeForSignal(signal) : 255);
    this.exitedAt = Date.now();
    if (this.openStreams === 0) {
      this.finish();
      return;
    }
    // Normally stdout and stderr close right after the exit; a background process that inherited them
    // may keep them open, so stop waiting once they have been quiet for a while (unless we paused them).
    // Time since the exit while reading (paused time does not count: a slow client must not cost
    // the output still in the pipe, which was lost when 2 s since the exit ran out mid-drain).
    let reading = 0;
    this.timer = setInterval(() => {
      const now = Date.now();
      if (this.paused) return;
      reading += 100;
      // Quiet since the exit too: output written just before it may still be in the pipe, unread.
      if (now - Math.max(this.lastData, this.exitedAt) >= 250 || reading >= 2000) this.finish();
    }, 100);
  }

  private finish(): void {
    if (this.finished || this.exitCode === null) return;
    this.finished = true;
    if (this.timer) clearInterval(this.timer);
    for (const s of this.outputs) s.destroy();
    this.events.exit(this.exitCode);
  }

  write(data: Buffer): boolean {
    const stdin = this.stdin;
    if (!stdin) {
      if (!this.stdinEnded && !this.finished) this.earlyInput.push(data);
      return true;
    }
    if (stdin.destroyed || stdin.writableEnded) return true;
    stdin.write(data);
    // Ask the clients to hold off only past a generous buffer: a paused websocket is not read, so its
    // close would go unnoticed until the process reads its stdin again.
    return stdin.writableLength < STDIN_HIGH_WATER;
  }

  endStdin(): void {
    this.stdinEnded = true;
    if (this.stdin && !this.stdin.writableEnded) this.stdin.end();
  }

  resize(): void {}

  signal(sig: NodeJS.Signals): boolean {
    if (this.pidValue === 0) {
      if (this.exitCode !== null) return false;
      this.earlySignals.push(sig);
      return true;
    }
    return signalGroup(this.pidValue, sig);
  }

  pause(): void {
    this.paused = true;
    for (const s of this.outputs) s.pause();
  }

  resume(): void {
    this.paused = false;
    // Quiet is counted from here: what waited in the pipe while paused comes after the resume.
    this.lastData = Date.now();
    for (const s of this.outputs) s.resume();
  }
}
