import { readFile, writeFile } from "node:fs/promises";
import { setPriority } from "node:os";
import { run } from "../exec/host-command.js";

/** The agent's nice value: it weighs ~87x a nice-0 task (each step ~1.25x; sched(7)). */
const AGENT_NICE = -20;

/**
 * The agent keeps answering while its unit is busy: a fork bomb fills the unit's cgroup with a
 * thousand runnable tasks, which at equal weights leave the agent a thousandth of the unit's CPU.
 * Its main thread runs at a higher priority, and with SCHED_RESET_ON_FORK (sched(7)) whatever it
 * starts begins at nice 0 again. A nice value weighs only within the unit's own cgroup, never
 * against other units or the host. Best effort, like the OOM score: it needs CAP_SYS_NICE.
 */
async function prioritizeAgent(pid: number): Promise<void> {
  if (!(pid > 1)) return;
  try {
    await run("chrt", ["--other", "--reset-on-fork", "--pid", "0", String(pid)]);
    setPriority(pid, AGENT_NICE);
  } catch {}
}

/**
 * When a unit runs out of memory the kernel must kill one of its processes, never PID 1 or the
 * agent. Only the host may lower a score (a user namespace cannot): best effort, since a host
 * without CAP_SYS_RESOURCE (some sandboxes) cannot either; the agent also raises the score of
 * every process it starts to the maximum. `pidFile` holds PID 1's host pid (runc's --pid-file);
 * the agent is its child.
 */
export async function protectAgent(pidFile: string): Promise<void> {
  const pid1 = Number((await readFile(pidFile, "utf8").catch(() => "")).trim());
  if (!pid1) return;
  const children = (await readFile(`/proc/${pid1}/task/${pid1}/children`, "utf8").catch(() => "")).trim().split(/\s+/);
  for (const pid of [String(pid1), ...children].filter(Boolean)) {
    await writeFile(`/proc/${pid}/oom_score_adj`, "-999").catch(() => {});
  }
  // Not awaited: `chrt` is a process start (milliseconds of every boot) and what it and the nice
  // value change is only a weight. Its order holds: the agent gets its higher priority only once what
  // it starts resets to nice 0, so no service started meanwhile keeps the agent's priority.
  for (const pid of children.filter(Boolean)) prioritizeAgent(Number(pid)).catch(() => {});
}
