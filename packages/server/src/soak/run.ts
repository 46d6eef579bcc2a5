// Issue #20: one soak (or chaos) run against a `ums serve` of its own (or a deployment, target.ts),
// start to end: the server on a fresh data dir and loopback port, the seeded workload (workload.ts),
// the continuous checks, the kills of the chaos mode, and at the end the deletion of everything and
// the host leak check. Used by bench/soak.mjs and soak/*.test.ts.
import { testImage } from "../runtime/image/test-image.js";
import { hostLeftovers, rssOf, type UnitProcess, unitAgentPid, unitInitPid, unitProcesses } from "./host.js";
import { Rng } from "./rng.js";
import { percentile, Stats, slope } from "./stats.js";
import { type SoakTarget, singleServe } from "./target.js";
import { describe, Workload } from "./workload.js";

export interface SoakOptions {
  readonly seed: number;
  readonly minutes: number;
  /** Most units at once (K). */
  readonly units: number;
  /** Kill `ums serve` (and units' agents and PID 1s) at random moments. */
  readonly chaos?: boolean;
  /** The org's running limit: at most this many units run at once (default 6). */
  readonly maxRunning?: number;
  readonly workers?: number;
  /** Cap on operations started per second (default 4). */
  readonly opsPerSecond?: number;
  readonly idleWarm?: string;
  readonly idleCold?: string;
  /** The full verification's period in seconds (default 60). */
  readonly verifyEvery?: number;
  /** Seconds between chaos kills: drawn in [min, max] (default 20 to 50). */
  readonly killGap?: readonly [number, number];
  /** Ends the run early (Ctrl-C): the end phase (delete everything, leak check) still runs. */
  readonly signal?: AbortSignal;
  readonly log?: (line: string) => void;
  /**
   * What to run against, made for the soak's organization `soak` (default: one `ums serve` of its
   * own). The run owns it: it is closed at the end, also on failure.
   */
  readonly target?: (env: NodeJS.ProcessEnv) => Promise<SoakTarget>;
}

/** The organization the soak's units belong to (a target makes its token for it). */
export const SOAK_ORG = "soak";

export interface OpRow {
  readonly kind: string;
  readonly count: number;
  readonly ok: number;
  readonly p50: number;
  readonly p99: number;
}

export interface SoakReport {
  readonly seed: number;
  /** What ran: "ums serve", or the processes of a deployment. */
  readonly target: string;
  readonly chaos: boolean;
  readonly minutes: number;
  readonly unitsMade: number;
  readonly maxUnits: number;
  readonly operations: number;
  readonly rows: OpRow[];
  readonly baseline: OpRow;
  readonly expected: Map<string, number>;
  readonly interrupted: Map<string, number>;
  readonly unexplained: Map<string, number>;
  readonly violations: string[];
  readonly lost: number;
  readonly rss: { startMiB: number; endMiB: number; maxMiB: number; slopeMiBPer10Min: number; samples: number };
  readonly kills: { server: number; agent: number; init: number; survived: number };
  readonly leftovers: string[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  const log = o.log ?? (() => {});
  const rng = new Rng(o.seed);
  const stats = new Stats();
  const image = await testImage();
  const poolDir = image.pool.path;
  const env = {
    UMS_IDLE_WARM: o.idleWarm ?? "15s",
    UMS_IDLE_COLD: o.idleCold ?? "45s",
    UMS_UPLINKS: "none",
    UMS_EGRESS_RANGES: "none",
  };
  const server = await (o.target ?? ((env) => singleServe({ name: o.chaos ? "chaos" : "soak", org: SOAK_ORG, env })))(
    env,
  );
  let stopping = false;
  let down: Promise<void> | undefined;
  const workload = new Workload(
    {
      // Known once the server has started, which is before the workload's first request.
      get base() {
        return server.base();
      },
      get token() {
        return server.token();
      },
      poolDir,
      async ready() {
        while (down) await down;
      },
    },
    rng,
    stats,
    { maxUnits: o.units, workers: o.workers ?? 3, opsPerSecond: o.opsPerSecond ?? 4, log },
  );
  const kills = { server: 0, agent: 0, init: 0, survived: 0 };
  const rss: [number, number][] = [];
  const leftovers: string[] = [];
  const t0 = Date.now();
  try {
    await server.setRunningLimit(o.maxRunning ?? 6);
    await server.start();
    log(
      `soak: seed ${o.seed}, ${o.minutes} min, up to ${o.units} units, ${server.label} at ${server.base()} ` +
        `(runtime ${server.runtimeId()})`,
    );
    const deadline = t0 + o.minutes * 60_000;
    const over = () => stopping || Date.now() >= deadline || !!o.signal?.aborted;
    const loops: Promise<void>[] = [];

    // The baseline, in the same run: GET /healthz every half second.
    loops.push(
      (async () => {
        while (!over()) {
          while (down) await down;
          const p = performance.now();
          const r = await fetch(`${server.base()}/healthz`).catch(() => undefined);
          stats.record("baseline GET /healthz", r?.ok ? "ok" : "interrupted", performance.now() - p);
          await sleep(500);
        }
      })(),
    );
    // The server's RSS every 5 s (of the server running then; a deployment's processes added up).
    loops.push(
      (async () => {
        while (!over()) {
          const pids = server.pids();
          if (pids.length && server.running())
            rss.push([(Date.now() - t0) / 60_000, pids.reduce((sum, pid) => sum + rssOf(pid), 0) / 2 ** 20]);
          await sleep(5000);
        }
      })(),
    );
    // The full verification, periodically.
    loops.push(
      (async () => {
        while (!over()) {
          // In steps, so the end of the run is not held up by a long interval (a chaos run in the
          // suite sets an hour: no periodic verification; it waited that hour before ending).
          const next = Date.now() + (o.verifyEvery ?? 60) * 1000;
          while (!over() && Date.now() < next) await sleep(Math.min(1000, next - Date.now()));
          if (over()) break;
          while (down) await down;
          await workload.verify("periodic");
        }
      })(),
    );
    if (o.chaos) loops.push(chaos());
    const work = workload.run();
    while (!over()) await sleep(500);
    workload.stop();
    await work;
    await Promise.all(loops);
    while (down) await down;
    await workload.verify("end");
  } catch (err) {
    stats.violation(`the run failed: ${describe(err)}`);
  } finally {
    stopping = true;
    workload.stop();
    // The end: delete everything through the API; then nothing of this server may be left.
    try {
      if (!server.running()) await server.start();
      const failed = await workload.deleteAll();
      for (const f of failed) stats.violation(`deleting at the end: ${f}`);
      const ids = [...workload.everIds];
      let left: string[] = [];
      const at = { rid: server.runtimeId(), dataDir: server.unitDataDir(), poolDir, unitIds: ids };
      for (let i = 0; i < 60; i++) {
        left = await hostLeftovers({ ...at, server: false });
        if (!left.length) break;
        await sleep(1000);
      }
      await server.stop("SIGTERM");
      await server.removeServerResources();
      left.push(...(await hostLeftovers({ ...at, server: true })));
      leftovers.push(...new Set(left));
      for (const l of leftovers) stats.violation(`left on the host after deleting everything: ${l}`);
    } catch (err) {
      stats.violation(`the end phase failed: ${describe(err)}`);
    } finally {
      // Whatever happened, nothing of this run stays on the host.
      await server.close();
    }
  }
  return report();

  async function chaos(): Promise<void> {
    const [lo, hi] = o.killGap ?? [20, 50];
    const over = () => stopping || Date.now() >= t0 + o.minutes * 60_000 - 20_000 || !!o.signal?.aborted;
    while (!over()) {
      await sleep(rng.int(lo * 1000, hi * 1000));
      if (over()) break;
      await workload.notVerifying();
      // The first kill is always of the server (a 2-minute run may have room for only a few kills,
      // and a chaos run that never killed the server proves little: CI saw one, seed 1905684243).
      const what = kills.server === 0 ? "server" : (rng.weighted({ server: 2, agent: 1, init: 1 }) ?? "server");
      const before = stats.violations.length;
      if (what === "server") {
        // The units nothing is happening to, and their PID 1: re-adopted, they keep it. Only those
        // the server reports running: a warm one may be in the middle of being stopped (idle-cold)
        // when the kill comes, and rightly boots with a new PID 1 later (seed 956667253).
        const statuses = await workload.unitStatuses().catch(() => new Map<string, { status: string }>());
        const idle = workload.runningCandidates().flatMap((u) => {
          if (statuses.get(u.name)?.status !== "running") return [];
          const pid = u.id ? unitInitPid(u.id) : undefined;
          return pid ? [[u, pid, u.ops, unitProcesses(u.id ?? "")] as const] : [];
        });
        let up = () => {};
        down = new Promise<void>((r) => {
          up = r;
        });
        try {
          // One process of a deployment at a time (no draw for one process: the seeds of runs before stay valid).
          const part = server.parts.length > 1 ? rng.pick(server.parts) : server.parts[0];
          workload.kills.push({ at: Date.now() });
          log(`chaos: kill -9 ${part ?? server.label} (pids ${server.pids().join(", ")})`);
          await server.stop("SIGKILL", part);
          kills.server++;
          await sleep(rng.int(0, 2000));
          await server.start();
          // Checked at once, before the workload resumes: a unit no operation touched since the
          // snapshot (an operation cut short by the kill may rightly have replaced its container)
          // and that nobody killed keeps its PID 1 when the new server re-adopts it.
          for (const [u, pid, ops, before] of idle) {
            const hit = workload.kills.some((k) => k.unit === u.name);
            if (hit || u.ops !== ops || !u.id || !workload.units.has(u.name)) continue;
            if (unitInitPid(u.id) === pid) continue;
            const list = (ps: UnitProcess[]) => ps.map((p) => `${p.pid}/${p.nsPid} ${p.cmdline}`).join("; ") || "none";
            stats.violation(
              `${u.name} was not re-adopted after server kill ${kills.server}: its PID 1 changed ` +
                `(before: ${list(before)}; after: ${list(unitProcesses(u.id))})`,
            );
          }
        } finally {
          down = undefined;
          up();
        }
        await workload.verify(`after server kill ${kills.server}`);
      } else {
        const victim = rng.pick(
          workload
            .runningCandidates()
            .filter((u) => u.id && (what === "agent" ? unitAgentPid(u.id) : unitInitPid(u.id))),
        );
        const pid = victim?.id ? (what === "agent" ? unitAgentPid(victim.id) : unitInitPid(victim.id)) : undefined;
        if (!victim || !pid) continue;
        workload.kills.push({ at: Date.now(), unit: victim.name });
        log(`chaos: kill -9 of ${victim.name}'s ${what === "agent" ? "agent" : "PID 1"} (host pid ${pid})`);
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          continue; // it ended meanwhile
        }
        kills[what]++;
        await sleep(3000);
        await workload.verify(`after ${what} kill of ${victim.name}`);
      }
      if (stats.violations.length === before) kills.survived++;
    }
  }

  function report(): SoakReport {
    const rows: OpRow[] = [];
    let baseline: OpRow = { kind: "baseline GET /healthz", count: 0, ok: 0, p50: Number.NaN, p99: Number.NaN };
    let operations = 0;
    for (const [kind, k] of [...stats.kinds].sort(([a], [b]) => a.localeCompare(b))) {
      const row = { kind, count: k.count, ok: k.ok, p50: percentile(k.ms, 50), p99: percentile(k.ms, 99) };
      if (kind.startsWith("baseline")) baseline = row;
      else {
        rows.push(row);
        if (!kind.startsWith("verify")) operations += k.count;
      }
    }
    const settled = rss.filter(([m]) => m >= Math.min(1, o.minutes / 3));
    const mib = rss.map(([, r]) => r);
    return {
      seed: o.seed,
      target: server.label,
      chaos: !!o.chaos,
      minutes: (Date.now() - t0) / 60_000,
      unitsMade: workload.everIds.size,
      maxUnits: o.units,
      operations,
      rows,
      baseline,
      expected: stats.errorsBy("expected"),
      interrupted: stats.errorsBy("interrupted"),
      unexplained: stats.errorsBy("error"),
      violations: stats.violations,
      lost: stats.lost,
      rss: {
        startMiB: settled[0]?.[1] ?? mib[0] ?? 0,
        endMiB: mib.at(-1) ?? 0,
        maxMiB: Math.max(0, ...mib),
        slopeMiBPer10Min: slope(settled) * 10,
        samples: rss.length,
      },
      kills,
      leftovers,
    };
  }
}

/** The report as text: what bench/soak.mjs prints and the tests log. */
export function formatReport(r: SoakReport): string {
  const f = (ms: number) => (Number.isFinite(ms) ? ms.toFixed(1) : "n/a");
  const ratio = (a: number, b: number) => (Number.isFinite(a) && b > 0 ? `${(a / b).toFixed(0)}x` : "n/a");
  const lines = [
    `${r.chaos ? "chaos" : "soak"}: seed ${r.seed} (replay: --seed ${r.seed}), ${r.minutes.toFixed(1)} min, ` +
      `${r.operations} operations, ${r.unitsMade} units made (at most ${r.maxUnits} at once), against ${r.target}`,
    "",
    `${"operation".padEnd(24)} ${"count".padStart(6)} ${"ok".padStart(6)} ${"p50 ms".padStart(9)} ${"p99 ms".padStart(9)} ${"p50/base".padStart(9)} ${"p99/base".padStart(9)}`,
  ];
  for (const row of [r.baseline, ...r.rows])
    lines.push(
      `${row.kind.padEnd(24)} ${String(row.count).padStart(6)} ${String(row.ok).padStart(6)} ${f(row.p50).padStart(9)} ${f(row.p99).padStart(9)} ${ratio(row.p50, r.baseline.p50).padStart(9)} ${ratio(row.p99, r.baseline.p99).padStart(9)}`,
    );
  const map = (title: string, m: Map<string, number>) => {
    lines.push("", `${title}: ${[...m.values()].reduce((a, b) => a + b, 0)}`);
    for (const [k, n] of m) lines.push(`  ${k}: ${n}`);
  };
  map("errors, documented refusals", r.expected);
  if (r.chaos) map("errors, cut short by a kill", r.interrupted);
  map("errors, unexplained", r.unexplained);
  lines.push(
    "",
    `${r.target} RSS: ${r.rss.startMiB.toFixed(0)} MiB at the start, ${r.rss.endMiB.toFixed(0)} MiB at the end, ` +
      `max ${r.rss.maxMiB.toFixed(0)} MiB, trend ${r.rss.slopeMiBPer10Min >= 0 ? "+" : ""}${r.rss.slopeMiBPer10Min.toFixed(1)} MiB per 10 min (${r.rss.samples} samples)`,
  );
  if (r.chaos)
    lines.push(
      `kills: ${r.kills.server} of ums serve, ${r.kills.agent} of a unit's agent, ${r.kills.init} of a unit's PID 1; ` +
        `survived ${r.kills.survived} of ${r.kills.server + r.kills.agent + r.kills.init}; operations lost: ${r.lost}`,
    );
  else lines.push(`acknowledged facts lost: ${r.lost}`);
  lines.push(`left on the host after deleting everything: ${r.leftovers.length ? r.leftovers.join("; ") : "nothing"}`);
  lines.push(`violations: ${r.violations.length}`);
  for (const v of r.violations.slice(0, 50)) lines.push(`  ${v}`);
  return lines.join("\n");
}
