import { constants, existsSync } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { join } from "node:path";
import { CGROUP_ROOT } from "./cgroups.js";

// A boot's cgroup attach without the wait for an RCU grace period.
//
// Moving a process into a cgroup (a write to a `cgroup.procs` file, as `runc run` does for the
// unit's first process, once per hierarchy) takes the kernel's global `cgroup_threadgroup_rwsem`
// for writing. Its writer first waits for an RCU grace period (percpu_down_write -> rcu_sync_enter,
// kernel/rcu/sync.c) unless another writer has passed within about one grace period: then it goes
// at once. On this host kind an attach on its own took 7-12 ms, one right after another 0.2 ms
// (`runc run`'s first attach was 13.4 ms of it under strace), and that wait is on every boot's path.
//
// While a boot is under way, this server keeps that lock "recently written" by writing its own pid
// into the cgroup it is already in, every WARM_INTERVAL_MS (a move to where it is moves nothing:
// cgroup_migrate_prepare_dst skips a task whose css_set does not change). The first such write
// waits out the grace period while the boot's other work goes on; runc's attach then finds the
// writer path open. What it costs the host: a few writes of a short-held lock per boot (forks and
// exits wait for its holder, microseconds), and the lock's readers on their slower path meanwhile.
// Best effort: a host where the write fails (a read-only cgroupfs, a cgroup v2 rule) turns it off.

/** Between one warming write's end and the next: shorter than a grace period (7-12 ms here). */
export const WARM_INTERVAL_MS = 4;

/** A hold ends by itself after this long (a `runc run` that hangs is not warmed for its duration). */
export const HOLD_MAX_MS = 2000;

/**
 * The `cgroup.procs` file of the cgroup this process is in, from its /proc/self/cgroup: the v1
 * `pids` hierarchy's where there is one (cgroup v1 or hybrid), else the unified hierarchy's when
 * cgroup v2 is mounted at `root` alone. Undefined when neither is found.
 */
export function ownProcsFile(procSelfCgroup: string, root: string, v2Only: boolean): string | undefined {
  let unified: string | undefined;
  for (const line of procSelfCgroup.split("\n")) {
    const m = /^\d+:([^:]*):(\/.*)$/.exec(line);
    if (!m) continue;
    const [, controllers = "", path = "/"] = m;
    if (path.includes("/..") || path.includes("\0")) return undefined;
    if (controllers.split(",").includes("pids")) return join(root, "pids", path, "cgroup.procs");
    if (controllers === "") unified = path;
  }
  return v2Only && unified !== undefined ? join(root, unified, "cgroup.procs") : undefined;
}

export class AttachWarmer {
  #holders = 0;
  #running: Promise<void> | null = null;
  #off = false;
  /** Warming writes made (for tests and the curious). */
  writes = 0;

  constructor(
    private readonly root: string = CGROUP_ROOT,
    private readonly intervalMs: number = WARM_INTERVAL_MS,
    private readonly holdMaxMs: number = HOLD_MAX_MS,
  ) {}

  /** Whether a failed write has turned warming off for good. */
  get off(): boolean {
    return this.#off;
  }

  /** Warms while held; the returned function releases this hold (once; by itself after holdMaxMs). */
  hold(): () => void {
    this.#holders++;
    if (!this.#running && !this.#off) {
      this.#running = this.#warm()
        .catch(() => {
          this.#off = true; // not this host's to do: boots go on as before
        })
        .finally(() => {
          this.#running = null;
        });
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(cap);
      this.#holders--;
    };
    const cap = setTimeout(release, this.holdMaxMs);
    cap.unref();
    return release;
  }

  /** Resolves once no warming write is under way (after the last hold's release). */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async #warm(): Promise<void> {
    // Where this process is now, read at each start: a process moved by its supervisor since the last
    // boot is warmed where it is, never moved back.
    const file = ownProcsFile(
      await readFile("/proc/self/cgroup", "utf8"),
      this.root,
      existsSync(join(this.root, "cgroup.controllers")),
    );
    if (!file) throw new Error("no cgroup.procs of this process's own cgroup");
    const fh = await open(file, constants.O_WRONLY);
    try {
      const pid = Buffer.from(String(process.pid));
      while (this.#holders > 0) {
        await fh.write(pid, 0, pid.length, 0);
        this.writes++;
        await new Promise((r) => setTimeout(r, this.intervalMs));
      }
    } finally {
      await fh.close();
    }
  }
}

/** The server's one warmer: boots hold it from their start until `runc run` has returned. */
export const attachWarmer = new AttachWarmer();
