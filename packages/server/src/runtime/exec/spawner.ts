import { type ChildProcess, spawn } from "node:child_process";

/**
 * Host commands started from a small helper process instead of the server's own (issue #16 parts 6
 * and 7). Node starts a command with fork(2), which copies the page tables of the whole calling
 * process while its event loop waits: for `ums serve` (150-250 MB resident) a profile showed 6-7 ms
 * of main thread per command, every request in flight waiting behind it (a unit's create runs
 * `btrfs subvolume snapshot`; a delete, `btrfs subvolume delete`). The helper is a bare node
 * process, so its forks are short, and they block only it. Its results come back over the IPC
 * channel; host-command.ts's `run()` gives callers the same answers and errors either way.
 */

/** The helper's program (CommonJS, given with -e: nothing to find on disk, bundled or not). */
const PROGRAM = `
"use strict";
const { execFile } = require("node:child_process");
const reply = (m) => { if (process.connected) process.send(m); };
process.on("message", (m) => {
  try {
    const child = execFile(
      m.command,
      m.args,
      { env: m.env, maxBuffer: m.maxBuffer, timeout: m.timeoutMs, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (!err) return reply({ id: m.id, ok: true, stdout, stderr });
        reply({
          id: m.id,
          ok: false,
          stdout,
          stderr,
          enoent: err.code === "ENOENT",
          exitCode: typeof err.code === "number" ? err.code : null,
          signal: err.signal || null,
        });
      },
    );
    if (child.stdin) {
      child.stdin.on("error", () => {});
      if (m.input !== undefined) child.stdin.end(m.input);
      else child.stdin.end();
    }
  } catch (err) {
    reply({ id: m.id, ok: false, thrown: String((err && err.message) || err) });
  }
});
// The server went (even by kill -9): so does the helper. Commands it started run to their end.
process.on("disconnect", () => process.exit(0));
`;

export interface SpawnRequest {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly timeoutMs: number;
  readonly maxBuffer: number;
  readonly input?: string | undefined;
}

/** What the helper says of one command: its output, and how it ended when it failed. */
export type SpawnReply =
  | { readonly ok: true; readonly stdout: string; readonly stderr: string }
  | {
      readonly ok: false;
      readonly stdout?: string;
      readonly stderr?: string;
      /** The command is not there. */
      readonly enoent?: boolean;
      readonly exitCode?: number | null;
      readonly signal?: NodeJS.Signals | null;
      /** execFile refused the request (an argument it cannot pass, say). */
      readonly thrown?: string;
    };

interface Pending {
  readonly resolve: (r: SpawnReply) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** Past the command's own timeout (the helper kills it then), how long an answer may take. */
const GRACE_MS = 10_000;

export class Spawner {
  private child: ChildProcess | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;

  /** Runs the command in the helper (started on first use, and again after it died). */
  run(req: SpawnRequest): Promise<SpawnReply> {
    if (this.closed) return Promise.reject(new Error("the host command helper is closed"));
    return new Promise<SpawnReply>((resolve, reject) => {
      const child = this.helper();
      const id = this.nextId++;
      const timer = setTimeout(() => {
        this.settle(id)?.reject(
          new Error(`${req.command}: no answer from the host command helper in ${req.timeoutMs + GRACE_MS} ms`),
        );
      }, req.timeoutMs + GRACE_MS);
      timer.unref();
      this.pending.set(id, { resolve, reject, timer });
      this.hold(true);
      child.send({ id, ...req }, (err) => {
        if (err)
          this.settle(id)?.reject(
            new Error(`could not hand ${req.command} to the host command helper: ${err.message}`),
          );
      });
    });
  }

  /** Stops the helper; commands still waiting are answered with an error. */
  close(): void {
    this.closed = true;
    this.failAll(new Error("the host command helper was closed"));
    this.child?.kill();
    this.child = undefined;
  }

  /** The helper's pid (tests). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  private helper(): ChildProcess {
    if (this.child) return this.child;
    const child = spawn(process.execPath, ["--max-old-space-size=64", "-e", PROGRAM], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      env: process.env,
    });
    this.child = child;
    child.on("message", (m: SpawnReply & { id: number }) => {
      this.settle(m.id)?.resolve(m);
    });
    child.on("error", (err) => this.lost(child, err));
    child.on("exit", (code, signal) =>
      this.lost(child, new Error(`the host command helper exited (${signal ?? `exit ${code}`})`)),
    );
    // Idle, it keeps nothing alive; hold() refs it while commands are out.
    this.hold(false);
    return child;
  }

  private lost(child: ChildProcess, err: Error): void {
    if (this.child !== child) return;
    this.child = undefined;
    // Whether each command ran is unknown: its caller gets the error (never a silent retry).
    this.failAll(err);
  }

  private failAll(err: Error): void {
    for (const id of [...this.pending.keys()]) this.settle(id)?.reject(err);
  }

  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    if (!p) return undefined;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (this.pending.size === 0) this.hold(false);
    return p;
  }

  private hold(busy: boolean): void {
    const c = this.child;
    if (!c) return;
    const channel = c.channel as { ref?: () => void; unref?: () => void } | undefined;
    if (busy) {
      c.ref();
      channel?.ref?.();
    } else {
      c.unref();
      channel?.unref?.();
    }
  }
}
