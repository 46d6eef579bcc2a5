import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { KernelFiles } from "../../usage/kernel-files.js";

// Units that press against their limits yield to the others (issue #19 finding 9). Equal CPU
// shares split a busy host evenly between a storming unit and one that answers requests, which
// doubles (and on a host short of CPU, more than doubles) every request of the quiet unit. A unit
// whose forks are refused at its pids limit (a fork bomb), or which uses its whole CPU quota in
// nearly every period, weighs 1/64 of a normal unit until it has been calm for a few seconds.
// Shares only count when units contend: alone, a unit still gets all the CPU its quota allows.

/** The kernel's default weight, which runc leaves every unit. */
export const NORMAL_SHARES = 1024;
/** The weight of a unit pressing against its limits. */
export const PRESSING_SHARES = 16;

/** Counters of one unit's cgroups: pids.events `max`, cpu.stat `nr_periods` and `nr_throttled`. */
export interface Pressure {
  readonly forksRefused: number;
  /** CFS periods in which the unit had work to run. */
  readonly periods: number;
  readonly throttled: number;
}

/** Fewer busy periods than this between two readings say nothing about the quota. */
const MIN_PERIODS = 5;

/**
 * Whether a unit pressed against its limits between two readings: a fork refused at its pids
 * limit, or its CPU quota used up in at least 80% of the CFS periods in which it had work (at least
 * five: a unit that runs out now and then, in a burst of work, does not count).
 */
export function pressing(before: Pressure, now: Pressure): boolean {
  if (now.forksRefused > before.forksRefused) return true;
  const periods = now.periods - before.periods;
  return periods >= MIN_PERIODS && now.throttled - before.throttled >= 0.8 * periods;
}

interface Watched {
  last: Pressure;
  demoted: boolean;
  /** When the unit last pressed (ms). */
  pressedAt: number;
}

/** Watches the units below `/ums-<rid>` every `everyMs` and sets their cpu.shares (cgroup v1). */
export class CpuWeights {
  private readonly units = new Map<string, Watched>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly kernel = new KernelFiles();

  constructor(
    private readonly cgroupRoot: string,
    private readonly rid: string,
    private readonly everyMs = 1000,
    private readonly calmMs = 5000,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      // A failed round (a unit gone meanwhile) changes nothing; the next one reads afresh.
      this.check()
        .catch(() => {})
        .then(() => this.schedule())
        .catch(() => {});
    }, this.everyMs);
    this.timer.unref();
  }

  private dir(controller: string, id = ""): string {
    return join(this.cgroupRoot, controller, `ums-${this.rid}`, id);
  }

  private read(id: string): Pressure | undefined {
    // Synchronously, into one reused buffer (usage/kernel-files.ts): every unit, every second.
    const k = this.kernel;
    if (!k.read(join(this.dir("pids", id), "pids.events"))) return undefined; // gone, or not a unit
    const forksRefused = k.field("max") ?? 0;
    if (!k.read(join(this.dir("cpu", id), "cpu.stat"))) return undefined;
    return { forksRefused, periods: k.field("nr_periods") ?? 0, throttled: k.field("nr_throttled") ?? 0 };
  }

  /** One round: demotes the units that pressed since the last, restores those calm for `calmMs`. */
  async check(now = Date.now()): Promise<void> {
    let ids: string[];
    try {
      ids = (await readdir(this.dir("cpu"), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch {
      return; // no v1 cpu controller, or no unit yet
    }
    for (const gone of [...this.units.keys()].filter((id) => !ids.includes(id))) this.units.delete(gone);
    for (const id of ids) {
      const current = this.read(id);
      if (!current) continue;
      const w = this.units.get(id);
      if (!w) {
        this.units.set(id, { last: current, demoted: false, pressedAt: 0 });
        continue;
      }
      const pressed = pressing(w.last, current);
      w.last = current;
      if (pressed) w.pressedAt = now;
      const demote = pressed || (w.demoted && now - w.pressedAt < this.calmMs);
      if (demote === w.demoted) continue;
      await writeFile(join(this.dir("cpu", id), "cpu.shares"), String(demote ? PRESSING_SHARES : NORMAL_SHARES));
      w.demoted = demote;
    }
  }
}
