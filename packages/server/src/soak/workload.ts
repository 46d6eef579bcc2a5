// Issue #20, soak and chaos: a seeded random workload against a real `ums serve`, with the client's
// model of what the server acknowledged (model.ts) checked continuously against what the API and
// the disk say. bench/soak.mjs and soak/*.test.ts both run it through run.ts.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ErrorCode } from "@ums/protocol";
import WebSocket from "ws";
import { execHttp } from "../testing/exec-client.js";
import { within } from "../util/within.js";
import { type CheckpointModel, copyFiles, type Files, known, newUnit, type UnitModel, unionFiles } from "./model.js";
import type { Rng } from "./rng.js";
import type { Outcome, Stats } from "./stats.js";

export interface SoakServer {
  readonly base: string;
  readonly token: string;
  /** The btrfs pool the server keeps unit disks in (units/<id>/{rootfs,checkpoints}). */
  readonly poolDir: string;
  /** Resolves once the server answers (during a chaos restart: once it is back). */
  ready(): Promise<void>;
}

/** A kill by the chaos run: of the server (no unit) or of a unit's agent or PID 1. */
export interface Kill {
  readonly at: number;
  readonly unit?: string;
}

export interface WorkloadOpts {
  readonly maxUnits: number;
  readonly workers: number;
  readonly opsPerSecond: number;
  readonly log: (line: string) => void;
}

/** A refusal: the server answered, with a status the operation did not ask for. */
class Refused extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly body: string,
  ) {
    super(`${status} ${code} ${body.slice(0, 300)}`);
  }
}
class Timeout extends Error {}
/** The operation found nothing to do (e.g. no service to restart): not counted. */
class Skip extends Error {}

interface Reply {
  readonly status: number;
  readonly text: string;
}

/** Per operation kind: its time limit and the refusals the interface documents for it. */
const LIMIT_MS: Record<string, number> = { default: 60_000, create: 30_000, "exec.long": 90_000 };
for (const k of ["fork", "checkpoint", "restore", "wake", "proxy", "verify.unit"]) LIMIT_MS[k] = 180_000;
const limitOf = (kind: string) => LIMIT_MS[kind] ?? LIMIT_MS.default ?? 60_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const HOME = "/home/unit";
const DIR = "soak";

export class Workload {
  readonly units = new Map<string, UnitModel>();
  /** Every unit id this run created (for the leak check at the end). */
  readonly everIds = new Set<string>();
  readonly kills: Kill[] = [];
  private seq = 0;
  private stopped = false;
  /** Operations in flight, and the verification waiting for them to end (it runs alone). */
  private inFlight = 0;
  private exclusive: Promise<void> | undefined;
  private drained: (() => void) | undefined;
  private tokens = 0;
  private verifying: Promise<void> | undefined;

  constructor(
    private readonly server: SoakServer,
    private readonly rng: Rng,
    readonly stats: Stats,
    private readonly o: WorkloadOpts,
  ) {}

  // ---- running --------------------------------------------------------------------------------

  /** Runs `o.workers` workers until `stop()`; resolves when they have all ended. */
  async run(): Promise<void> {
    const refill = setInterval(() => {
      this.tokens = Math.min(this.o.opsPerSecond, this.tokens + this.o.opsPerSecond / 10);
    }, 100);
    try {
      await Promise.all(Array.from({ length: this.o.workers }, () => this.worker()));
    } finally {
      clearInterval(refill);
    }
  }

  stop(): void {
    this.stopped = true;
  }

  private async worker(): Promise<void> {
    while (!this.stopped) {
      await this.server.ready();
      while (this.exclusive) await this.exclusive;
      if (this.tokens < 1) {
        await sleep(50);
        continue;
      }
      this.tokens--;
      this.inFlight++;
      try {
        await this.step();
      } finally {
        this.inFlight--;
        if (this.inFlight === 0) this.drained?.();
      }
    }
  }

  /** Runs `fn` with no operation in flight (the verification: the model is exact then). */
  async alone<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusive) await this.exclusive;
    let release = () => {};
    this.exclusive = new Promise<void>((r) => {
      release = r;
    });
    try {
      if (this.inFlight > 0) await new Promise<void>((r) => (this.drained = r));
      this.drained = undefined;
      return await fn();
    } finally {
      this.exclusive = undefined;
      release();
    }
  }

  // ---- choosing -------------------------------------------------------------------------------

  private free(pred: (u: UnitModel) => boolean = () => true): UnitModel[] {
    return [...this.units.values()].filter((u) => !u.busy && !u.maybe && u.id && pred(u));
  }
  private knownFile(u: UnitModel): [string, string] | undefined {
    const files = [...u.files].flatMap(([p, a]) => {
      const v = known(a);
      return typeof v === "string" ? [[p, v] as [string, string]] : [];
    });
    return this.rng.pick(files);
  }
  private liveCheckpoints(u: UnitModel): [string, CheckpointModel][] {
    return [...u.checkpoints].filter(([, c]) => !c.maybeDeleted);
  }

  private async step(): Promise<void> {
    const n = this.units.size;
    const kind = this.rng.weighted({
      create: n < this.o.maxUnits ? (n < 2 ? 20 : 3) : 0,
      delete: n > Math.max(2, this.o.maxUnits / 2) ? 1 : 0,
      fork: n < this.o.maxUnits ? 1.5 : 0,
      "exec.short": 6,
      "exec.long": 1.5,
      "exec.tty": 2,
      "exec.kill": 1.5,
      "fs.write": 8,
      "fs.read": 6,
      "fs.rename": 2,
      "svc.put": 1.5,
      "svc.restart": 1,
      "svc.crash": 1,
      "svc.delete": 1,
      checkpoint: 2.5,
      restore: 1.5,
      "cp.delete": 1,
      "policy.resources": 1,
      "policy.network": 1,
      proxy: 3,
      wake: 2,
      list: 1,
    });
    if (!kind) return;
    if (kind === "create") return this.create();
    if (kind === "list") return this.list();
    if (kind === "fork") {
      const src = this.rng.pick(this.free((u) => this.liveCheckpoints(u).length > 0));
      return src ? this.fork(src) : undefined;
    }
    const u = this.rng.pick(this.free());
    if (!u) return;
    switch (kind) {
      case "delete":
        return this.remove(u);
      case "exec.short":
        return this.execShort(u);
      case "exec.long":
        return this.op(kind, [u], async () => {
          const r = await this.exec(u, ["sh", "-c", "sleep 3; echo long-done"]);
          if (r.trim() !== "long-done") throw new Error(`long exec printed '${r}'`);
        });
      case "exec.tty":
        return this.execTty(u);
      case "exec.kill":
        return this.execKill(u);
      case "fs.write":
        return this.fsWrite(u);
      case "fs.read":
        return this.fsRead(u);
      case "fs.rename":
        return this.fsRename(u);
      case "svc.put":
      case "svc.restart":
      case "svc.crash":
      case "svc.delete":
        return this.service(kind, u);
      case "checkpoint":
        return this.checkpoint(u);
      case "restore":
        return this.restore(u);
      case "cp.delete":
        return this.deleteCheckpoint(u);
      case "policy.resources":
        return this.op(kind, [u], async () => {
          const body = {
            memory: { limit_mb: this.rng.pick([512, 768, 1024]) },
            pids: { limit: this.rng.pick([512, 1024, 4096]) },
            cpu: { cores: this.rng.pick([0.5, 1]) },
          };
          await this.ok(await this.call("POST", `/v1/units/${u.name}/policy/resources`, body), 200);
        });
      case "policy.network":
        return this.op(kind, [u], async () => {
          const rules = this.rng.pick([
            [{ action: "allow", domain: "example.com" }],
            [
              { action: "allow", domain: "*.example.org" },
              { action: "deny", domain: "*" },
            ],
          ]);
          await this.ok(await this.call("POST", `/v1/units/${u.name}/policy/network`, { rules }), 200);
        });
      case "proxy":
        return this.proxy(u);
      case "wake":
        return this.wake(u);
    }
  }

  // ---- one operation --------------------------------------------------------------------------

  /**
   * Runs one operation holding `units`, within its time limit, and records its outcome: ok, a
   * documented refusal (`expected`), cut short by a chaos kill, or a violation.
   */
  private async op(
    kind: string,
    units: UnitModel[],
    fn: () => Promise<void>,
    expected: (e: Refused) => boolean = () => false,
  ): Promise<void> {
    for (const u of units) {
      u.busy = true;
      u.ops++;
    }
    const t0 = Date.now();
    const p0 = performance.now();
    const limit = limitOf(kind);
    const work = fn();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        work,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Timeout(`over its time limit of ${limit / 1000} s`)), limit);
        }),
      ]);
      this.stats.record(kind, "ok", performance.now() - p0);
    } catch (err) {
      if (err instanceof Skip) return;
      const [outcome, detail] = this.classify(err, t0, units, expected);
      this.stats.record(kind, outcome, performance.now() - p0, detail);
      if (outcome === "error")
        this.stats.violation(`${kind} on ${units.map((u) => u.name).join(",") || "-"}: ${describe(err)}`);
    } finally {
      clearTimeout(timer);
      // A timed-out request still holds its units until it ends (at most 5 minutes more).
      await within(
        work.catch(() => {}),
        300_000,
        undefined,
      );
      for (const u of units) u.busy = false;
    }
  }

  private classify(err: unknown, t0: number, units: UnitModel[], expected: (e: Refused) => boolean): [Outcome, string] {
    const t1 = Date.now();
    const names = new Set(units.map((u) => u.name));
    const interrupted = this.kills.some((k) =>
      k.unit === undefined ? k.at >= t0 - 500 && k.at <= t1 : names.has(k.unit) && k.at <= t1 && t0 <= k.at + 30_000,
    );
    const detail = err instanceof Refused ? `${err.status} ${err.code}` : err instanceof Timeout ? "timeout" : "failed";
    if (interrupted) return ["interrupted", detail];
    // Documented refusals: the org's running limit reached by busy units (spec: 409 running_limit).
    if (err instanceof Refused && (expected(err) || (err.status === 409 && err.code === ErrorCode.RunningLimit)))
      return ["expected", detail];
    return ["error", detail];
  }

  private async call(method: string, path: string, json?: unknown, headers: Record<string, string> = {}) {
    const r = await fetch(`${this.server.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.server.token}`,
        ...(json === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: json === undefined ? undefined : typeof json === "string" ? json : JSON.stringify(json),
      signal: AbortSignal.timeout(limitOf("verify.unit")),
    });
    return { status: r.status, text: await r.text() } satisfies Reply;
  }

  private async ok(r: Reply, ...statuses: number[]): Promise<Reply> {
    if (statuses.includes(r.status)) return r;
    let code = "";
    try {
      code = (JSON.parse(r.text) as { code?: string }).code ?? "";
    } catch {}
    throw new Refused(r.status, code, r.text);
  }

  /** The events of an NDJSON answer; fails unless it ends with `complete` and has no `error`. */
  private async ndjson(r: Reply): Promise<{ type: string; data?: string; id?: string; exit_code?: number }[]> {
    await this.ok(r, 200);
    const events = r.text
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; data?: string; id?: string; exit_code?: number });
    if (events.some((e) => e.type === "error") || events.at(-1)?.type !== "complete")
      throw new Refused(200, "stream", r.text);
    return events;
  }

  /** Runs a command (HTTP exec); its stdout, and fails unless it exits 0. */
  private async exec(u: UnitModel, cmd: string[]): Promise<string> {
    const r = await execHttp(this.server.base, this.server.token, u.name, cmd);
    if (r.status !== 200) await this.ok({ status: r.status, text: r.body.toString() }, 200);
    if (r.exitCode !== 0) throw new Error(`'${cmd.join(" ")}' exited ${r.exitCode}: ${r.stderr.toString()}`);
    return r.stdout.toString();
  }

  // ---- the operations -------------------------------------------------------------------------

  private async create(): Promise<void> {
    const u = newUnit(`s${++this.seq}`);
    this.units.set(u.name, u);
    await this.op("create", [u], async () => {
      const r = await this.ok(await this.call("POST", "/v1/units", { name: u.name }), 201);
      this.adopt(u, (JSON.parse(r.text) as { id: string }).id);
    });
    if (u.maybe && !this.kills.length) this.units.delete(u.name);
  }

  private adopt(u: UnitModel, id: string): void {
    u.id = id;
    u.maybe = false;
    this.everIds.add(id);
  }

  private async fork(src: UnitModel): Promise<void> {
    const [cp, c] = this.rng.pick(this.liveCheckpoints(src)) ?? [];
    if (!cp || !c) return;
    const u = newUnit(`s${++this.seq}`, copyFiles(c.files));
    u.services = undefined;
    this.units.set(u.name, u);
    await this.op("fork", [u, src], async () => {
      const body = { name: u.name, from: { unit: src.name, checkpoint: cp } };
      const r = await this.ok(await this.call("POST", "/v1/units", body), 201);
      this.adopt(u, (JSON.parse(r.text) as { id: string }).id);
    });
    if (u.maybe && !this.kills.length) this.units.delete(u.name);
  }

  private async remove(u: UnitModel): Promise<void> {
    await this.op("delete", [u], async () => {
      u.maybe = true;
      await this.ok(await this.call("DELETE", `/v1/units/${u.name}`), 204);
      this.units.delete(u.name);
    });
  }

  private async list(): Promise<void> {
    await this.op("list", [], async () => {
      const listed = await this.listUnits();
      for (const u of this.units.values())
        if (!u.maybe && !listed.has(u.name)) throw new Error(`unit ${u.name} is not listed`);
    });
  }

  /** Each unit's status as the server reports it (a chaos kill checks re-adoption of running ones only). */
  unitStatuses(): Promise<Map<string, { id: string; status: string }>> {
    return this.listUnits();
  }

  private async listUnits(): Promise<Map<string, { id: string; status: string }>> {
    const r = await this.ok(await this.call("GET", "/v1/units?max_results=500"), 200);
    const page = JSON.parse(r.text) as { sprites: { name: string; id: string; status: string }[]; has_more: boolean };
    if (page.has_more) throw new Error("more than 500 units listed");
    return new Map(page.sprites.map((s) => [s.name, s]));
  }

  private async execShort(u: UnitModel): Promise<void> {
    const f = this.knownFile(u);
    await this.op("exec.short", [u], async () => {
      if (!f) {
        const out = await this.exec(u, ["sh", "-c", "echo $((6*7))"]);
        if (out.trim() !== "42") throw new Error(`echo printed '${out}'`);
        return;
      }
      const out = await this.exec(u, ["cat", `${HOME}/${DIR}/${f[0]}`]);
      if (out !== f[1]) this.lostFile(u, f[0], f[1], out);
    });
  }

  private lostFile(u: UnitModel, path: string, want: string, got: string | null): never {
    this.stats.lost++;
    throw new Error(
      `${u.name}:${path} holds ${JSON.stringify(got?.slice(0, 80))}, not the acknowledged ${want.slice(0, 80)}`,
    );
  }

  /** A websocket to the unit's exec endpoint; resolves when open. */
  private openWs(u: UnitModel, q: URLSearchParams): Promise<{ ws: WebSocket; out: () => string; messages: unknown[] }> {
    const ws = new WebSocket(`${this.server.base.replace("http", "ws")}/v1/units/${u.name}/exec?${q}`, {
      headers: { authorization: `Bearer ${this.server.token}` },
    });
    const chunks: Buffer[] = [];
    const messages: unknown[] = [];
    ws.on("message", (d, bin) => {
      if (bin) chunks.push(d as Buffer);
      else messages.push(JSON.parse(String(d)));
    });
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve({ ws, out: () => Buffer.concat(chunks).toString("latin1"), messages }));
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (d: Buffer) => {
          body += d;
        });
        res.on("end", () => reject(new Refused(res.statusCode ?? 0, "", body)));
      });
      ws.once("error", reject);
    });
  }

  private async until(pred: () => boolean, what: string, ms = 60_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(25);
    }
  }

  private async execTty(u: UnitModel): Promise<void> {
    await this.op("exec.tty", [u], async () => {
      const q = new URLSearchParams({ tty: "true", stdin: "true", cmd: "bash" });
      const c = await this.openWs(u, q);
      try {
        const closed = new Promise<number>((r) => c.ws.once("close", (code) => r(code)));
        c.ws.send("echo tty-$((6*7))\r");
        await this.until(() => c.out().includes("tty-42"), "the TTY's echo");
        c.ws.send("exit 0\r");
        const code = await within(closed, 30_000, -1);
        if (code !== 1000) throw new Error(`the TTY session closed with ${code}`);
      } finally {
        c.ws.terminate();
      }
    });
  }

  private async execKill(u: UnitModel): Promise<void> {
    await this.op("exec.kill", [u], async () => {
      const q = new URLSearchParams({ cmd: "sleep", max_run_after_disconnect: "30s" });
      q.append("cmd", "300");
      const c = await this.openWs(u, q);
      try {
        await this.until(() => c.messages.length > 0, "the session's id");
        const id = (c.messages[0] as { session_id?: number }).session_id;
        if (typeof id !== "number") throw new Error(`no session id in ${JSON.stringify(c.messages[0])}`);
        const events = await this.ndjson(await this.call("POST", `/v1/units/${u.name}/exec/${id}/kill?signal=KILL`));
        const done = events.at(-1);
        if (done?.exit_code !== 137) throw new Error(`killed sleep ended with ${JSON.stringify(done)}`);
      } finally {
        c.ws.terminate();
      }
    });
  }

  private fsQuery(path: string, extra: Record<string, string> = {}): string {
    return new URLSearchParams({ path: `${DIR}/${path}`, workingDir: HOME, ...extra }).toString();
  }

  private async fsWrite(u: UnitModel): Promise<void> {
    const existing = [...u.files.keys()];
    const path =
      existing.length >= 8 || (existing.length && this.rng.next() < 0.5) ? this.rng.pick(existing) : undefined;
    const name = path ?? `f${++this.seq}.txt`;
    // One in ten is large, over 1 MiB about half the time: a read of it goes as the file's descriptor (issue #16).
    const size = this.rng.next() < 0.1 ? this.rng.int(64 << 10, 3 << 20) : this.rng.int(1, 4096);
    const content = `${u.name}:${name}:${++this.seq}:`.padEnd(size, String.fromCharCode(97 + this.rng.int(0, 25)));
    await this.op("fs.write", [u], async () => {
      const allowed = u.files.get(name) ?? new Set([null]);
      allowed.add(content);
      u.files.set(name, allowed);
      await this.ok(
        await this.call("PUT", `/v1/units/${u.name}/fs/write?${this.fsQuery(name, { mkdir: "true" })}`, content, {
          "content-type": "application/octet-stream",
        }),
        200,
      );
      u.files.set(name, new Set([content]));
    });
  }

  private async fsRead(u: UnitModel): Promise<void> {
    const f = this.knownFile(u);
    if (!f) return;
    await this.op("fs.read", [u], async () => {
      const r = await this.ok(await this.call("GET", `/v1/units/${u.name}/fs/read?${this.fsQuery(f[0])}`), 200, 404);
      if (r.status === 404) this.lostFile(u, f[0], f[1], null);
      if (r.text !== f[1]) this.lostFile(u, f[0], f[1], r.text);
    });
  }

  private async fsRename(u: UnitModel): Promise<void> {
    const f = this.knownFile(u);
    if (!f) return;
    const dest = `r${++this.seq}.txt`;
    await this.op("fs.rename", [u], async () => {
      u.files.set(dest, new Set([null, f[1]]));
      u.files.get(f[0])?.add(null);
      const body = { source: `${DIR}/${f[0]}`, dest: `${DIR}/${dest}`, workingDir: HOME };
      await this.ok(await this.call("POST", `/v1/units/${u.name}/fs/rename`, body), 200);
      u.files.delete(f[0]);
      u.files.set(dest, new Set([f[1]]));
    });
  }

  /** The unit's services, asked of the server when the model does not know them. */
  private async services(u: UnitModel): Promise<Set<string>> {
    if (u.services) return u.services;
    const r = await this.ok(await this.call("GET", `/v1/units/${u.name}/services`), 200);
    u.services = new Set((JSON.parse(r.text) as { name: string }[]).map((s) => s.name));
    return u.services;
  }

  private async service(kind: "svc.put" | "svc.restart" | "svc.crash" | "svc.delete", u: UnitModel): Promise<void> {
    // A signal to a service that is not running at that moment (between a crash and its restart,
    // or before it started on a unit that was just woken) is a documented 409 (spec 2.7).
    const notRunning = (e: Refused) =>
      kind === "svc.crash" && e.status === 409 && e.code === ErrorCode.ServiceNotRunning;
    await this.op(
      kind,
      [u],
      async () => {
        const have = [...(await this.services(u))].filter((s) => s !== "web");
        const svc = kind === "svc.put" ? `sv${this.rng.int(1, 3)}` : this.rng.pick(have);
        if (!svc) throw new Skip();
        const path = `/v1/units/${u.name}/services/${svc}`;
        if (kind === "svc.put") {
          u.services = undefined;
          await this.ok(await this.call("PUT", path, { cmd: "sleep", args: ["1000"], needs: [] }), 200);
          u.services = new Set([...(await this.services(u)), svc]);
        } else if (kind === "svc.restart") await this.ndjson(await this.call("POST", `${path}/restart?duration=0`));
        else if (kind === "svc.crash")
          await this.ok(
            await this.call("POST", `/v1/units/${u.name}/services/signal`, { name: svc, signal: "KILL" }),
            200,
          );
        else {
          u.services = undefined;
          await this.ok(await this.call("DELETE", path), 204);
        }
      },
      notRunning,
    );
  }

  private async checkpoint(u: UnitModel): Promise<void> {
    await this.op("checkpoint", [u], async () => {
      u.pendingCheckpoint = copyFiles(u.files);
      const events = await this.ndjson(await this.call("POST", `/v1/units/${u.name}/checkpoint`, { comment: "soak" }));
      const id = events.at(-1)?.id;
      if (!id) throw new Error(`no checkpoint id in ${JSON.stringify(events.at(-1))}`);
      u.checkpoints.set(id, { files: u.pendingCheckpoint, maybeDeleted: false });
      u.pendingCheckpoint = undefined;
    });
  }

  private async restore(u: UnitModel): Promise<void> {
    const [cp, c] = this.rng.pick(this.liveCheckpoints(u)) ?? [];
    if (!cp || !c) return;
    await this.op("restore", [u], async () => {
      u.pendingCheckpoint = copyFiles(u.files); // the automatic backup's files
      u.files = unionFiles(u.files, c.files);
      u.services = undefined;
      const events = await this.ndjson(await this.call("POST", `/v1/units/${u.name}/checkpoints/${cp}/restore`));
      // Under /v1/units the backup is listed like any checkpoint (includeAuto defaults to true).
      const backup = (events.at(-1) as { backup_id?: string } | undefined)?.backup_id;
      if (backup && u.pendingCheckpoint) u.checkpoints.set(backup, { files: u.pendingCheckpoint, maybeDeleted: false });
      u.files = copyFiles(c.files);
      u.pendingCheckpoint = undefined;
    });
  }

  private async deleteCheckpoint(u: UnitModel): Promise<void> {
    const [cp, c] = this.rng.pick(this.liveCheckpoints(u)) ?? [];
    if (!cp || !c) return;
    await this.op(
      "cp.delete",
      [u],
      async () => {
        c.maybeDeleted = true;
        const r = await this.call("DELETE", `/v1/units/${u.name}/checkpoints/${cp}`);
        if (r.status === 409) c.maybeDeleted = false;
        await this.ok(r, 204);
        u.checkpoints.delete(cp);
      },
      // Spec 6.1: the active checkpoint (the one the unit was last restored to) cannot be deleted.
      (e) => e.status === 409 && e.code === ErrorCode.CheckpointActive,
    );
  }

  /** A request through the unit's HTTP proxy to a python server (a service on 8080) in the unit. */
  private async proxy(u: UnitModel): Promise<void> {
    await this.op("proxy", [u], async () => {
      if (!(await this.services(u)).has("web")) {
        const svc = {
          cmd: "python3",
          args: ["-m", "http.server", "8080", "--bind", "0.0.0.0"],
          dir: HOME,
          needs: [],
          http_port: 8080,
        };
        u.services = undefined;
        await this.ok(await this.call("PUT", `/v1/units/${u.name}/services/web`, svc), 200);
        await this.services(u);
      }
      const f = this.knownFile(u);
      const path = f ? `/${DIR}/${f[0]}` : "/";
      // The server starts after a wake or a restore: 502 until it listens (spec: the unit's target).
      const deadline = Date.now() + 30_000;
      for (;;) {
        const r = await this.call("GET", `/v1/units/${u.name}${path}`);
        if (r.status === 502 && r.text.includes(ErrorCode.UnitNoListener) && Date.now() < deadline) {
          await sleep(250);
          continue;
        }
        await this.ok(r, 200);
        if (f && r.text !== f[1]) this.lostFile(u, f[0], f[1], r.text);
        return;
      }
    });
  }

  private async wake(u: UnitModel): Promise<void> {
    const r = await this.call("GET", `/v1/units/${u.name}`).catch(() => undefined);
    const status = r?.status === 200 ? (JSON.parse(r.text) as { status: string }).status : "unknown";
    await this.op(status === "running" ? "exec.short" : `wake.${status}`, [u], async () => {
      await this.exec(u, ["true"]);
    });
  }

  // ---- verification ---------------------------------------------------------------------------

  /**
   * With nothing in flight: the units the API lists are the model's (uncertain ones resolved), each
   * has its disk, its checkpoints on disk are the listed ones and include every acknowledged one,
   * it answers an exec, and its files are the acknowledged ones. Returns the units' statuses.
   */
  async verify(reason: string): Promise<void> {
    let done = () => {};
    const verifying = new Promise<void>((r) => {
      done = r;
    });
    this.verifying = verifying;
    try {
      await this.verifyAlone(reason);
    } finally {
      if (this.verifying === verifying) this.verifying = undefined;
      done();
    }
  }

  /** Resolves when no verification runs (a chaos kill waits for it: a kill mid-check is no finding). */
  async notVerifying(): Promise<void> {
    while (this.verifying) await this.verifying;
  }

  private async verifyAlone(reason: string): Promise<void> {
    await this.alone(async () => {
      await this.server.ready();
      const p0 = performance.now();
      let listed: Map<string, { id: string; status: string }>;
      try {
        listed = await this.listUnits();
      } catch (err) {
        this.stats.record("verify", "error", 0, "list");
        this.stats.violation(`verify (${reason}): listing units failed: ${describe(err)}`);
        return;
      }
      for (const u of [...this.units.values()]) {
        const l = listed.get(u.name);
        if (u.maybe) {
          if (l) this.adopt(u, l.id);
          else this.units.delete(u.name);
        } else if (!l) {
          this.stats.lost++;
          this.stats.violation(`verify (${reason}): unit ${u.name} was acknowledged but is not listed`);
          this.units.delete(u.name);
        }
      }
      for (const name of listed.keys())
        if (!this.units.has(name))
          this.stats.violation(`verify (${reason}): unit ${name} is listed but was never made`);
      const todo = [...this.units.values()];
      await Promise.all(
        [0, 1].map(async () => {
          for (let u = todo.shift(); u; u = todo.shift()) await this.verifyUnit(u, reason);
        }),
      );
      this.stats.record("verify", "ok", performance.now() - p0);
    });
  }

  private async verifyUnit(u: UnitModel, reason: string): Promise<void> {
    const fail = (what: string) => this.stats.violation(`verify (${reason}) ${u.name} (${u.id}): ${what}`);
    const p0 = performance.now();
    try {
      const disk = join(this.server.poolDir, "units", u.id ?? "?");
      if (!existsSync(join(disk, "rootfs"))) fail(`listed without a disk (${disk}/rootfs)`);
      const all = (await this.ok(await this.call("GET", `/v1/units/${u.name}/checkpoints?includeAuto=true`), 200)).text;
      const listedAll = (JSON.parse(all) as { id: string }[]).map((c) => c.id).sort();
      const onDisk = (existsSync(join(disk, "checkpoints")) ? readdirSync(join(disk, "checkpoints")) : []).sort();
      if (JSON.stringify(listedAll) !== JSON.stringify(onDisk))
        fail(`checkpoints listed ${listedAll.join(",")} but on disk ${onDisk.join(",")}`);
      const r = await this.ok(await this.call("GET", `/v1/units/${u.name}/checkpoints`), 200);
      const infos = JSON.parse(r.text) as { id: string }[];
      const listed = new Set(infos.map((c) => c.id));
      for (const [id, c] of [...u.checkpoints]) {
        if (listed.has(id)) c.maybeDeleted = false;
        else if (c.maybeDeleted) u.checkpoints.delete(id);
        else {
          this.stats.lost++;
          fail(`acknowledged checkpoint ${id} is not listed`);
          u.checkpoints.delete(id);
        }
      }
      for (const id of listed) {
        if (u.checkpoints.has(id)) continue;
        if (u.pendingCheckpoint) u.checkpoints.set(id, { files: u.pendingCheckpoint, maybeDeleted: false });
        else
          fail(
            `checkpoint ${id} is listed but was never acknowledged nor in flight: ${JSON.stringify(infos.find((c) => c.id === id))}; the client knows ${[...u.checkpoints.keys()].join(",")}`,
          );
      }
      u.pendingCheckpoint = undefined;
      await this.verifyFiles(u, fail);
      this.stats.record("verify.unit", "ok", performance.now() - p0);
    } catch (err) {
      this.stats.record(
        "verify.unit",
        "error",
        performance.now() - p0,
        err instanceof Refused ? String(err.status) : "",
      );
      fail(`does not answer: ${describe(err)}`);
    }
  }

  /** Every unit answers: an exec lists its files, which must be the acknowledged ones. */
  private async verifyFiles(u: UnitModel, fail: (what: string) => void): Promise<void> {
    const script = `cd ${HOME}/${DIR} 2>/dev/null || exit 0; for f in *; do [ -f "$f" ] || continue; printf '%s\\n' "$f"; wc -c < "$f"; cat "$f"; done`;
    // A unit whose agent or PID 1 was just killed boots again on this request: a few tries.
    let out: Buffer | undefined;
    for (let i = 0; ; i++) {
      const r = await execHttp(this.server.base, this.server.token, u.name, ["sh", "-c", script]);
      if (r.status === 200 && r.exitCode === 0) {
        out = r.stdout;
        break;
      }
      const recent = this.kills.some((k) => k.unit === u.name && Date.now() - k.at < 60_000);
      if (!recent || i >= 30)
        throw new Error(`exec answered ${r.status} exit ${r.exitCode}: ${r.body.toString().slice(0, 300)}`);
      await sleep(2000);
    }
    const found = new Map<string, string>();
    for (let at = 0; at < out.length; ) {
      const nl1 = out.indexOf(10, at);
      const nl2 = out.indexOf(10, nl1 + 1);
      const name = out.subarray(at, nl1).toString();
      const size = Number(
        out
          .subarray(nl1 + 1, nl2)
          .toString()
          .trim(),
      );
      found.set(name, out.subarray(nl2 + 1, nl2 + 1 + size).toString());
      at = nl2 + 1 + size;
    }
    for (const [path, allowed] of [...u.files]) {
      const actual = found.get(path) ?? null;
      if (!allowed.has(actual)) {
        this.stats.lost++;
        fail(`file ${path} holds ${JSON.stringify(actual?.slice(0, 60) ?? null)}, not one acknowledged`);
      }
      if (actual === null) u.files.delete(path);
      else u.files.set(path, new Set([actual]));
    }
    for (const path of found.keys()) if (!u.files.has(path)) fail(`file ${path} exists but was never written`);
  }

  /** Ids of units the model holds, for choosing a victim of a unit kill. */
  runningCandidates(): UnitModel[] {
    return this.free();
  }

  /** Deletes every unit through the API (the end of a run); returns the names it could not delete. */
  async deleteAll(): Promise<string[]> {
    const failed: string[] = [];
    const listed = await this.listUnits().catch(() => new Map<string, { id: string }>());
    for (const [name, l] of listed) {
      this.everIds.add(l.id);
      const r = await this.call("DELETE", `/v1/units/${name}`).catch((err: unknown) => ({
        status: 0,
        text: String(err),
      }));
      if (r.status !== 204) failed.push(`${name}: ${r.status} ${r.text.slice(0, 200)}`);
      this.units.delete(name);
    }
    return failed;
  }
}

export function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return `${err.message}${cause instanceof Error ? ` (${cause.message})` : ""}`;
  }
  return String(err);
}

export type { Files };
