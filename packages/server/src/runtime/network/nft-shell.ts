import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { toolEnv } from "../exec/host-command.js";

const TIMEOUT_MS = 5000;
/** The line that ends an nft error: spaces, then `^` and `~` under the part of the line at fault. */
const ERROR_END = /\n *[\^~]+ *\n$/;
/** How long after its last piece an error without that line is taken as complete. */
const ERROR_QUIET_MS = 100;

/**
 * One long-lived `nft -i -e` for the resolver's hot path: a process start costs 5–20 ms, a line
 * to a running nft ~1 ms (measured by bench/network.mjs). Each line is one transaction; with
 * `-e` nft echoes the objects it added and then a `# new generation` line, an error goes to
 * stderr. A line that adds nothing is echoed with nothing, so every line must add something. One line at a time; after an error, a timeout or an exit the process
 * is replaced, so no late output is ever taken for another line's.
 */
export class NftShell {
  private proc: ChildProcessWithoutNullStreams | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  run(line: string): Promise<void> {
    if (line.includes("\n")) return Promise.reject(new Error("one nft line at a time"));
    if (!/(^|;\s*)add /.test(line)) return Promise.reject(new Error("an nft shell line must add something"));
    const next = this.queue.then(() => this.send(line));
    this.queue = next.catch(() => {});
    return next;
  }

  private start(): ChildProcessWithoutNullStreams {
    if (this.proc && this.proc.exitCode === null && !this.proc.killed) return this.proc;
    const p = spawn("nft", ["-i", "-e"], { stdio: ["pipe", "pipe", "pipe"], env: toolEnv() });
    p.on("error", () => {});
    p.stdin.on("error", () => {});
    this.proc = p;
    return p;
  }

  private kill(): void {
    this.proc?.kill("SIGKILL");
    this.proc = undefined;
  }

  private send(line: string): Promise<void> {
    if (this.closed) return Promise.reject(new Error("nft shell closed"));
    const p = this.start();
    return new Promise<void>((resolve, reject) => {
      let out = "";
      let err = "";
      let settled = false;
      let quiet: NodeJS.Timeout | undefined;
      const done = (e?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(quiet);
        p.stdout.off("data", onOut);
        p.stderr.off("data", onErr);
        p.off("exit", onExit);
        if (e) {
          this.kill();
          reject(e);
        } else resolve();
      };
      const onOut = (d: Buffer) => {
        out += d.toString();
        if (out.includes("# new generation")) done();
      };
      const failed = () => done(new Error(`nft: ${err.trim()}`));
      const onErr = (d: Buffer) => {
        err += d.toString();
        // nft writes an error in pieces: `Error: <what>`, the line, then a line of `^` (and `~`)
        // under the part at fault, which ends it. A message without that line is taken once
        // nothing more came for ERROR_QUIET_MS. Then the process is replaced.
        clearTimeout(quiet);
        if (ERROR_END.test(err)) failed();
        else quiet = setTimeout(failed, ERROR_QUIET_MS);
      };
      const onExit = () => done(new Error(`nft exited: ${err.trim()}`));
      const timer = setTimeout(() => done(new Error(`nft did not answer within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
      p.stdout.on("data", onOut);
      p.stderr.on("data", onErr);
      p.once("exit", onExit);
      p.stdin.write(`${line}\n`);
    });
  }

  close(): void {
    this.closed = true;
    this.kill();
  }
}
