import { spawn } from "node:child_process";
import { closeSync, existsSync, fstatSync, openSync, readSync } from "node:fs";
import type { Socket } from "node:net";
import { join } from "node:path";
import { run } from "../exec/host-command.js";

/** The host's end of a unit's start gate (Runc.start): `open` closes it, and the unit goes on. */
export interface Gate {
  open(): void;
}

export type ContainerStatus = "created" | "running" | "paused" | "stopped";

export interface ContainerState {
  readonly id: string;
  readonly pid: number;
  readonly status: ContainerStatus;
  readonly bundle: string;
}

/**
 * The runc command line (runc 1.1), with a state root of ums's own so `list` shows only the
 * containers this server made.
 */
export class Runc {
  constructor(
    private readonly root: string,
    private readonly binary = "runc",
  ) {}

  private args(...rest: string[]): string[] {
    return ["--root", this.root, ...rest];
  }

  /**
   * `runc run -d`: returns once PID 1 runs. runc's stdout and stderr, which the unit's processes
   * inherit, are both `log` (the unit's agent.log, appended to): the agent's own log lines and a
   * crash's output land there, and nothing of the unit is piped into this process (a pipe that
   * outlived runc was read for as long as the unit ran, into memory). When runc fails, its message
   * is what it appended to the log. `passFds` are handed
   * to PID 1 as descriptors 3, 4, … (`--preserve-fds`), e.g. the agent's listening socket. With
   * `gate`, one more descriptor follows them: a socket whose other end is returned, open; the unit
   * sees it end when the host closes that (see bootUnit: the host finishes setting the unit up).
   */
  start(
    id: string,
    bundle: string,
    log: { readonly fd: number; readonly path: string },
    pidFile: string,
    passFds: readonly number[] = [],
    opts: { gate?: boolean } = {},
  ): Promise<Gate | undefined> {
    return new Promise((resolve, reject) => {
      const count = passFds.length + (opts.gate ? 1 : 0);
      const preserve = count > 0 ? ["--preserve-fds", String(count)] : [];
      const args = this.args("run", "--detach", ...preserve, "--pid-file", pidFile, "--bundle", bundle, id);
      const logStart = fstatSync(log.fd).size;
      const child = spawn(this.binary, args, {
        stdio: ["ignore", log.fd, log.fd, ...passFds, ...(opts.gate ? (["pipe"] as const) : [])],
      });
      const gateEnd = opts.gate ? (child.stdio[3 + passFds.length] as Socket | null) : null;
      gateEnd?.on("error", () => {}); // the unit may close its end first: nothing to report
      const gate = gateEnd
        ? {
            open: () => {
              gateEnd.destroy();
            },
          }
        : undefined;
      child.on("error", (err) => {
        gate?.open();
        reject(err);
      });
      child.on("exit", (code) => {
        if (code === 0) return resolve(gate);
        gate?.open();
        reject(new Error(`runc run ${id} failed (exit ${code}): ${appended(log.path, logStart)}`));
      });
    });
  }

  async state(id: string): Promise<ContainerState | undefined> {
    if (!this.exists(id)) return undefined;
    try {
      return JSON.parse((await run(this.binary, this.args("state", id))).stdout) as ContainerState;
    } catch (err) {
      if (/does not exist|not found/i.test(String(err))) return undefined;
      throw err;
    }
  }

  async list(): Promise<ContainerState[]> {
    const out = (await run(this.binary, this.args("list", "--format", "json"))).stdout;
    return (JSON.parse(out || "[]") as ContainerState[] | null) ?? [];
  }

  async pause(id: string): Promise<void> {
    await run(this.binary, this.args("pause", id));
  }

  async resume(id: string): Promise<void> {
    await run(this.binary, this.args("resume", id));
  }

  /** Whether runc has state for the container (a cheap check that spawns nothing). */
  exists(id: string): boolean {
    return existsSync(join(this.root, id));
  }

  /** Removes the container whatever its state (`delete --force` kills it first). */
  async delete(id: string): Promise<void> {
    if (!this.exists(id)) return;
    try {
      await run(this.binary, this.args("delete", "--force", id));
    } catch (err) {
      if (!/does not exist|not found/i.test(String(err))) throw err;
    }
  }
}

/**
 * What was appended to the file at `path` from `offset` on (its first 4 KiB, trimmed): runc's message
 * when it failed. The file is the host's (the unit's run dir), opened by its path, read only.
 */
function appended(path: string, offset: number): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const buf = Buffer.alloc(4096);
    const n = readSync(fd, buf, 0, buf.length, offset);
    return buf.subarray(0, n).toString("utf8").trim();
  } catch (err) {
    return `(its message could not be read: ${(err as Error).message})`;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
