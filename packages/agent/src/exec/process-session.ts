import { readdirSync, readFileSync } from "node:fs";

// Signals reach all of an exec session (spec 6.3: "signal sent to the process group"): its process
// started as the leader of a session and process group of its own (setsid), so everything it
// starts is in that group, or, for a TTY shell's jobs (job control gives each its own group), in
// that session. A process that calls setsid itself leaves both; only stopping the unit (its cgroup)
// reaches it then.

/** Live processes of this pid namespace whose process group or session is `id` (proc(5), /proc/<pid>/stat). */
export function sessionMembers(id: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "latin1");
    } catch {
      continue; // gone meanwhile
    }
    // `pid (comm) state ppid pgrp session …`; comm may hold spaces and parentheses.
    const [state, , pgrp, session] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (state === "Z" || state === "X") continue;
    if (Number(pgrp) === id || Number(session) === id) out.push(Number(entry));
  }
  return out;
}

/**
 * Sends `sig` to the process group `id` in one kill(2) (atomic: a fork under way delivers it to
 * the child too) and then to every other process of session `id`. A process `id` that has neither
 * yet (just forked, before its setsid: a TTY's first control message can come that early) gets it
 * itself: its starter blocks signals until its handlers are the defaults, so it is acted on then.
 * False when none was there.
 */
export function signalSession(id: number, sig: NodeJS.Signals): boolean {
  if (id <= 1 || id === process.pid) return false; // never PID 1 or the agent
  let sent = false;
  try {
    process.kill(-id, sig);
    sent = true;
  } catch {}
  for (const pid of sessionMembers(id)) {
    try {
      process.kill(pid, sig);
      sent = true;
    } catch {}
  }
  if (!sent) {
    try {
      process.kill(id, sig);
      sent = true;
    } catch {}
  }
  return sent;
}

/**
 * SIGKILLs the session now and again every `everyMs` until none of it is left or `forMs` passed:
 * a member of another group may fork between the scan of /proc and its kill (the group itself
 * cannot: its kill is atomic). Returns false when none was there.
 */
export function killSession(id: number, forMs = 2000, everyMs = 20): boolean {
  const deadline = Date.now() + forMs;
  const again = () => {
    if (Date.now() < deadline && signalSession(id, "SIGKILL")) setTimeout(again, everyMs).unref();
  };
  const sent = signalSession(id, "SIGKILL");
  if (sent) setTimeout(again, everyMs).unref();
  return sent;
}

/** The session `id`'s whole process group and session; SIGKILL again until none of it is left (a fork bomb). */
export function signalGroup(id: number, sig: NodeJS.Signals): boolean {
  return sig === "SIGKILL" ? killSession(id) : signalSession(id, sig);
}

/** A process as it was seen: its pid and its start time (proc(5) field 22), so a reused pid is told apart. */
export interface ProcessRef {
  pid: number;
  start: string;
}

interface Stat {
  ppid: number;
  pgrp: number;
  session: number;
  start: string;
}

export function readStat(pid: number): Stat | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return null;
  }
  // Fields from the state (field 3) on; comm (field 2) may hold spaces and parentheses.
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  if (f[0] === "Z" || f[0] === "X") return null;
  return { ppid: Number(f[1]), pgrp: Number(f[2]), session: Number(f[3]), start: f[19] ?? "" };
}

/**
 * The live descendants of `root` (by parent pid), outside its process group and session too: a child
 * that called setsid (a daemon, `setsid cmd &`) leaves both, but stays the child of its parent while
 * that lives. One that leaves its parent too (a double fork) is reparented to PID 1 and out of reach.
 */
export function descendants(root: number): ProcessRef[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const children = new Map<number, { pid: number; start: string }[]>();
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const st = readStat(Number(entry));
    if (!st) continue;
    const list = children.get(st.ppid) ?? [];
    list.push({ pid: Number(entry), start: st.start });
    children.set(st.ppid, list);
  }
  const out: ProcessRef[] = [];
  const queue = [root];
  while (queue.length > 0 && out.length < 100_000) {
    for (const c of children.get(queue.shift() as number) ?? []) {
      out.push(c);
      queue.push(c.pid);
    }
  }
  return out;
}

/**
 * Signals each process still alive as it was seen (same start time), and the process group and
 * session it leads, if any (SIGKILL: again until none of them is left, as killSession).
 */
export function signalRefs(refs: readonly ProcessRef[], sig: NodeJS.Signals): void {
  for (const ref of refs) {
    if (ref.pid <= 1 || ref.pid === process.pid) continue;
    const st = readStat(ref.pid);
    if (!st || st.start !== ref.start) continue;
    try {
      process.kill(ref.pid, sig);
    } catch {}
    if (st.pgrp === ref.pid || st.session === ref.pid) signalGroup(ref.pid, sig);
  }
}
