import { type FSWatcher, watch } from "node:fs";
import { appendFile, stat, truncate } from "node:fs/promises";

/** The most a unit's agent.log may hold before it is cut. */
export const AGENT_LOG_MAX_BYTES = 8 * 1024 * 1024;
/** How often the set of running units is compared with the watched files (in memory: no syscall per unit). */
const RECONCILE_MS = 1000;
/** A file that changed is looked at this long after its first change (its writes coalesce meanwhile). */
const SETTLE_MS = 200;

export interface AgentLogCapDeps {
  /** The units running now (on this node). */
  readonly running: () => readonly string[];
  /** The host path of a unit's agent.log (its run dir, which no unit can reach). */
  readonly path: (unitId: string) => string;
  readonly log: { warn(obj: object, msg: string): void };
  readonly maxBytes?: number;
  /** fs.watch (tests give one that fails). */
  readonly watch?: typeof watch;
}

interface Watched {
  readonly watcher: FSWatcher | undefined;
  timer: NodeJS.Timeout | undefined;
}

/**
 * A unit's agent.log is a host file the unit's PID 1 and agent hold open for appending (their stdout
 * and stderr, runc/runc.ts `start`): the agent's log lines and a crash's output go there. Root in the
 * unit can make them write anything (it may ptrace its own processes), so the file is the host's
 * disk a unit could fill. Each running unit's file is watched (inotify: an idle unit costs nothing);
 * `SETTLE_MS` after a change, a file over `maxBytes` is cut to a line that says so (the writers
 * append: their next line starts the file again) and the cut is logged. What a unit can take is
 * about `maxBytes` plus what it writes in that time.
 */
export class AgentLogCap {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;
  private readonly max: number;

  constructor(private readonly deps: AgentLogCapDeps) {
    this.max = deps.maxBytes ?? AGENT_LOG_MAX_BYTES;
  }

  start(): void {
    this.reconcile();
    this.timer ??= setInterval(() => this.reconcile(), RECONCILE_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const id of [...this.watched.keys()]) this.unwatch(id);
  }

  /** Watches the files of units that began running, lets go of those that stopped. */
  reconcile(): void {
    const running = new Set(this.deps.running());
    for (const id of this.watched.keys()) if (!running.has(id)) this.unwatch(id);
    for (const id of running) {
      const w = this.watched.get(id);
      if (!w) this.watch(id);
      else if (!w.watcher) this.schedule(id);
    }
  }

  /** Cuts the unit's agent.log if it is over the cap. */
  private async cut(id: string): Promise<void> {
    const path = this.deps.path(id);
    try {
      const { size } = await stat(path);
      if (size <= this.max) return;
      await truncate(path, 0);
      const line = { time: new Date().toISOString(), msg: `ums: cut at ${size} bytes (over ${this.max})` };
      await appendFile(path, `${JSON.stringify(line)}\n`);
      this.deps.log.warn({ unitId: id, bytes: size }, "a unit's agent.log was over its cap and was cut");
    } catch (err) {
      // Gone with its unit meanwhile: nothing to cut.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        this.deps.log.warn({ unitId: id, err }, "could not check a unit's agent.log");
      }
    }
  }

  private watch(id: string): void {
    let watcher: FSWatcher | undefined;
    try {
      watcher = (this.deps.watch ?? watch)(this.deps.path(id), { persistent: false }, () => this.schedule(id));
      // Its file went with its unit: the next reconcile lets go of it.
      watcher.on("error", () => {});
    } catch (err) {
      // No file yet (a boot under way): tried again at the next reconcile. Any other failure (the
      // host's inotify watches used up): the file is looked at at every reconcile instead.
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      this.deps.log.warn({ unitId: id, err }, "could not watch a unit's agent.log; it is looked at every second");
    }
    this.watched.set(id, { watcher, timer: undefined });
    this.schedule(id); // what it wrote before the watch began
  }

  private unwatch(id: string): void {
    const w = this.watched.get(id);
    if (!w) return;
    clearTimeout(w.timer);
    w.watcher?.close();
    this.watched.delete(id);
  }

  private schedule(id: string): void {
    const w = this.watched.get(id);
    if (!w || w.timer) return;
    w.timer = setTimeout(() => {
      w.timer = undefined;
      this.cut(id).catch((err: unknown) =>
        this.deps.log.warn({ unitId: id, err }, "could not check a unit's agent.log"),
      );
    }, SETTLE_MS);
    w.timer.unref();
  }
}
