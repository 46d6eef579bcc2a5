import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { ErrorCode, parseDuration, TASK_MAX_EXPIRE_MS } from "@ums/protocol";
import type { Activity } from "../../../lifecycle/activity.js";

// Keep-awake tasks of the internal API (docs/ARCHITECTURE.md section 5: a unit is not idle while "a keep-awake
// task held through the internal API" lives). A process in the unit registers `{name, expire}`;
// until it expires (at most TASK_MAX_EXPIRE_MS ahead) or is deleted, the task holds the unit
// running. Tasks live in ums (in memory, and in a file in the unit's run directory so that a
// restarted server holds them again when it re-adopts the unit) and die with the unit (clear()
// when it stops).
//   GET /v1/tasks → [{name, expire}]   POST /v1/tasks {name, expire} → 201 (creates or replaces)
//   GET|PUT|DELETE /v1/tasks/{name}     (PUT body {expire})
// `expire` is a duration from now (seconds or `10m` style) or an ISO 8601 time.

export interface TaskInfo {
  name: string;
  expire: string;
}

interface Task {
  expireAt: number;
  release: () => void;
  timer: NodeJS.Timeout;
}

export const TASK_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
export const MAX_TASKS_PER_UNIT = 64;

export type TaskResult = { status: number; body?: unknown };

/** Parses `expire` into an absolute time (ms), or an error message naming the field. */
export function parseExpire(value: unknown, now: number): number | string {
  let at: number | null = null;
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) at = now + value * 1000;
  else if (typeof value === "string") {
    const ms = parseDuration(value);
    if (ms !== null) at = now + ms;
    else if (/^\d{4}-\d\d-\d\dT/.test(value) && !Number.isNaN(Date.parse(value))) at = Date.parse(value);
  }
  if (at === null) return "expire: must be a duration (e.g. 600 or 10m) or an ISO 8601 time";
  if (at <= now) return "expire: must be in the future";
  if (at - now > TASK_MAX_EXPIRE_MS) return "expire: must be at most 24h ahead";
  return at;
}

/** Where a unit's tasks are kept across server restarts (one small JSON file per unit). */
export interface TaskFiles {
  path(unitId: string): string;
}

type Saved = { name: string; expireAt: number }[];

export class KeepAwakeTasks {
  private readonly units = new Map<string, Map<string, Task>>();

  constructor(
    private readonly activity: Activity,
    private readonly files?: TaskFiles,
  ) {}

  /** Holds again the tasks saved for a unit (a server restarted and re-adopted it). */
  reload(unitId: string, now = Date.now()): void {
    if (!this.files || this.units.has(unitId)) return;
    let saved: Saved = [];
    try {
      saved = JSON.parse(readFileSync(this.files.path(unitId), "utf8")) as Saved;
    } catch {
      return;
    }
    for (const t of Array.isArray(saved) ? saved.slice(0, MAX_TASKS_PER_UNIT) : []) {
      if (typeof t?.name === "string" && TASK_NAME_RE.test(t.name) && typeof t.expireAt === "number") {
        if (t.expireAt > now && t.expireAt - now <= TASK_MAX_EXPIRE_MS) this.put(unitId, t.name, t.expireAt, now);
      }
    }
    this.save(unitId);
  }

  list(unitId: string): TaskInfo[] {
    return [...(this.units.get(unitId) ?? new Map<string, Task>())].map(([name, t]) => info(name, t));
  }

  get(unitId: string, name: string): TaskResult {
    const t = this.units.get(unitId)?.get(name);
    return t ? { status: 200, body: info(name, t) } : notFound(name);
  }

  /** Creates or replaces task `name`; 201 when it is new. */
  set(unitId: string, name: unknown, expire: unknown, now = Date.now()): TaskResult {
    const errors: string[] = [];
    if (typeof name !== "string" || !TASK_NAME_RE.test(name))
      errors.push("name: must be 1-128 letters, digits, '.', '_', ':' or '-'");
    const at = parseExpire(expire, now);
    if (typeof at === "string") errors.push(at);
    if (errors.length > 0 || typeof at !== "number")
      return { status: 400, body: { errors, code: ErrorCode.Validation } };
    const tasks = this.units.get(unitId) ?? new Map<string, Task>();
    const old = tasks.get(name as string);
    if (!old && tasks.size >= MAX_TASKS_PER_UNIT)
      return {
        status: 400,
        body: { errors: [`name: a unit holds at most ${MAX_TASKS_PER_UNIT} tasks`], code: ErrorCode.Validation },
      };
    const task = this.put(unitId, name as string, at, now);
    this.save(unitId);
    return { status: old ? 200 : 201, body: info(name as string, task) };
  }

  private put(unitId: string, name: string, at: number, now: number): Task {
    const tasks = this.units.get(unitId) ?? new Map<string, Task>();
    const old = tasks.get(name);
    if (old) clearTimeout(old.timer);
    const task: Task = {
      expireAt: at,
      release: old?.release ?? this.activity.hold(unitId),
      timer: setTimeout(() => this.delete(unitId, name), at - now),
    };
    task.timer.unref();
    tasks.set(name, task);
    this.units.set(unitId, tasks);
    return task;
  }

  /** Written aside and renamed over: a crash leaves the old list or the new one. */
  private save(unitId: string): void {
    if (!this.files) return;
    const path = this.files.path(unitId);
    const saved: Saved = [...(this.units.get(unitId) ?? [])].map(([name, t]) => ({ name, expireAt: t.expireAt }));
    try {
      if (saved.length === 0) rmSync(path, { force: true });
      else {
        writeFileSync(`${path}.tmp`, JSON.stringify(saved));
        renameSync(`${path}.tmp`, path);
      }
    } catch {
      // The run directory is gone: the unit stopped, and its tasks with it.
    }
  }

  delete(unitId: string, name: string): TaskResult {
    const tasks = this.units.get(unitId);
    const t = tasks?.get(name);
    if (!tasks || !t) return notFound(name);
    clearTimeout(t.timer);
    t.release();
    tasks.delete(name);
    if (tasks.size === 0) this.units.delete(unitId);
    this.save(unitId);
    return { status: 204 };
  }

  /** The unit stopped: its tasks end with it. */
  clear(unitId: string): void {
    for (const name of [...(this.units.get(unitId)?.keys() ?? [])]) this.delete(unitId, name);
    if (this.files) rmSync(this.files.path(unitId), { force: true });
  }

  /** The server stops, the unit keeps running: its tasks stay saved for the next server. */
  forget(unitId: string): void {
    for (const t of this.units.get(unitId)?.values() ?? []) {
      clearTimeout(t.timer);
      t.release();
    }
    this.units.delete(unitId);
  }
}

function info(name: string, t: Task): TaskInfo {
  return { name, expire: new Date(t.expireAt).toISOString() };
}

function notFound(name: string): TaskResult {
  return { status: 404, body: { error: `no task '${name}' in this unit`, code: ErrorCode.TaskNotFound } };
}
