import { appendFile, stat, truncate } from "node:fs/promises";

/** The most a unit's agent.log may hold before it is cut. */
export const AGENT_LOG_MAX_BYTES = 8 * 1024 * 1024;
/** How often running units' agent.log files are looked at. */
export const AGENT_LOG_CHECK_MS = 1000;

export interface AgentLogCapDeps {
  /** The units running now (on this node). */
  readonly running: () => readonly string[];
  /** The host path of a unit's agent.log (its run dir, which no unit can reach), or undefined. */
  readonly path: (unitId: string) => string | undefined;
  readonly log: { warn(obj: object, msg: string): void };
  readonly maxBytes?: number;
  readonly everyMs?: number;
}

/**
 * A unit's agent.log is a host file the unit's PID 1 and agent hold open for appending (their stdout
 * and stderr, runc.ts `start`): the agent's log lines and a crash's output go there. Root in the unit
 * can make them write anything (it may ptrace its own processes), so the file is the host's disk a
 * unit could fill. Every `everyMs` a file over `maxBytes` is cut to nothing but a line that says so
 * (the writers append: their next line starts the file again), and the cut is logged: what a unit
 * can take is about `maxBytes` plus what it writes in `everyMs`.
 */
export class AgentLogCap {
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<unknown> | undefined;
  private readonly max: number;

  constructor(private readonly deps: AgentLogCapDeps) {
    this.max = deps.maxBytes ?? AGENT_LOG_MAX_BYTES;
  }

  start(): void {
    this.timer ??= setInterval(() => {
      // One check at a time: a slow disk skips ticks rather than stacking them.
      this.checking ??= this.check()
        .catch((err: unknown) => this.deps.log.warn({ err }, "checking the units' agent.log files failed"))
        .finally(() => {
          this.checking = undefined;
        });
    }, this.deps.everyMs ?? AGENT_LOG_CHECK_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.checking;
  }

  /** Cuts every running unit's agent.log that is over the cap; returns the units whose log was cut. */
  async check(): Promise<string[]> {
    const cut: string[] = [];
    for (const id of this.deps.running()) {
      const path = this.deps.path(id);
      if (!path) continue;
      try {
        const { size } = await stat(path);
        if (size <= this.max) continue;
        await truncate(path, 0);
        await appendFile(
          path,
          `${JSON.stringify({ time: new Date().toISOString(), msg: `ums: cut at ${size} bytes (over ${this.max})` })}\n`,
        );
        this.deps.log.warn({ unitId: id, bytes: size }, "a unit's agent.log was over its cap and was cut");
        cut.push(id);
      } catch (err) {
        // Gone with its unit meanwhile: nothing to cut.
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
          this.deps.log.warn({ unitId: id, err }, "could not check a unit's agent.log");
        }
      }
    }
    return cut;
  }
}
