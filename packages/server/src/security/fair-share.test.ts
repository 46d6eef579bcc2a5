import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { DEFAULT_UNIT_DISK_MB } from "../config.js";
import { testDialects } from "../testing/dialects.js";
import { type ExecResult, execHttp } from "../testing/exec-client.js";
import { startTestServer, type TestServer } from "../testing/server.js";

const sqlite = testDialects[0];
const CGROUP = "/sys/fs/cgroup";
/** How long the storm runs while the other unit and the API are measured. */
const STORM_MS = 20_000;
/** The storm stops itself after this long even if the test process is gone (a file the bomb checks). */
const STORM_BOUND_S = 90;
const SAMPLES = 20;
/** Idle and storm windows alternate, this long each. */
const WINDOW_MS = 1500;
const IDLE_COLD_S = 3;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const p50 = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

/**
 * CPU burners and fork bombs, as root in the unit: the classic shell one, and a perl loop in which
 * every process keeps forking when the kernel refuses (as bash's fork retry does), so that the unit
 * stays at its pids limit. Bounded three ways: by the unit's pids limit (forks fail there), by the
 * test (it kills the session or deletes the unit, also when it fails: `after` deletes every unit),
 * and by itself: a watchdog started first creates a stop file after STORM_BOUND_S (with a shell
 * builtin, which needs no fork), and the bombs and the burners stop once it exists. The leader
 * `exec`s into a sleep so the session stays open while the storm runs.
 */
function stormScript(detached: boolean): string {
  return [
    "S=/tmp/storm.stop; rm -f $S",
    `(sleep ${STORM_BOUND_S}; : > $S) &`,
    "for i in 1 2 3 4; do (while [ ! -e $S ]; do :; done) & done",
    "f() { [ -e $S ] || { f | f & }; }; f",
    "perl -e 'until (-e $ARGV[0]) { fork }' $S &",
    detached ? "exit 0" : `exec sleep ${STORM_BOUND_S}`,
  ].join("\n");
}

/** The unit's cgroup below a controller, e.g. `/sys/fs/cgroup/pids/ums-1a2b/<id>` (found by its id). */
async function unitCgroup(controller: string, unitId: string): Promise<string | undefined> {
  for (const parent of await readdir(`${CGROUP}/${controller}`).catch(() => [] as string[])) {
    if (parent.startsWith("ums-") && existsSync(`${CGROUP}/${controller}/${parent}/${unitId}`)) {
      return `${CGROUP}/${controller}/${parent}/${unitId}`;
    }
  }
  return undefined;
}

async function readNumber(file: string): Promise<number> {
  const text = (await readFile(file, "utf8")).trim();
  return text === "max" ? Number.POSITIVE_INFINITY : Number(text);
}

/** An exec session as root over a websocket (spec 4.3), and its id from the first message. */
async function openSession(baseUrl: string, token: string, unit: string, cmd: string[]) {
  const q = new URLSearchParams([...cmd.map((c): [string, string] => ["cmd", c]), ["user", "root"]]);
  const ws = new WebSocket(`${baseUrl.replace("http", "ws")}/v1/units/${unit}/exec?${q}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  ws.on("error", () => {});
  const info = await new Promise<{ session_id: number }>((resolve, reject) => {
    ws.once("message", (data) => resolve(JSON.parse(String(data))));
    ws.once("close", (code) => reject(new Error(`the session closed at once (${code})`)));
  });
  return { ws, id: info.session_id };
}

/** Waits until the bomb has hit the unit's pids limit (a fork refused there counts in pids.events). */
async function filled(pidsDir: string): Promise<void> {
  let tasks = 0;
  await within(30_000, "the storm reaches the unit's pids limit", async () => {
    const refused = /^max (\d+)$/m.exec(await readFile(`${pidsDir}/pids.events`, "utf8"))?.[1];
    tasks = await readNumber(`${pidsDir}/pids.current`);
    return Number(refused) > 0;
  }).catch((err: Error) => {
    throw new Error(`${err.message} (${tasks} tasks)`);
  });
}

/** The programs of stormScript's processes, by their command name (proc(5) `comm`). */
const STORM_COMMANDS = new Set(["sh", "perl", "sleep"]);

/**
 * The cgroup's tasks (threads included, as pids.current counts them) by command and state (proc(5):
 * R running, S sleeping, Z zombie, …), e.g. `perl Z` → 212.
 */
async function census(pidsDir: string): Promise<Map<string, number>> {
  const tasks = (await readFile(`${pidsDir}/tasks`, "utf8").catch(() => "")).split("\n").filter(Boolean);
  const counts = new Map<string, number>();
  for (const tid of tasks) {
    const stat = await readFile(`/proc/${tid}/stat`, "latin1").catch(() => "");
    if (!stat) continue; // gone meanwhile
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const key = `${comm} ${stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}
const describeCensus = (c: Map<string, number>) => [...c].map(([k, n]) => `${k}×${n}`).join(", ") || "no task";
/** Tasks of the storm's programs in the census, zombies included (a pids slot until reaped). */
const stormTasks = (c: Map<string, number>) =>
  [...c].reduce((n, [k, count]) => n + (STORM_COMMANDS.has(k.split(" ")[0] ?? "") ? count : 0), 0);

/** Polls until `check` holds; returns how long it took (ms), or fails after `ms`. */
async function within(ms: number, what: string, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await check()) return performance.now() - start;
    if (performance.now() - start > ms) assert.fail(`${what}: not within ${ms} ms`);
    await sleep(50);
  }
}

/**
 * Issue #19 finding 9 (spec 4.5 resources policy; docs/SECURITY.md): one unit must not stall the
 * host. Two real units with the server's default limits; a fork bomb and CPU burners in one; the
 * other unit's exec and the API stay within 3x of their idle latency, and the storm ends within
 * seconds of a kill or a delete.
 */
describe("fair share: one unit cannot stall the host", () => {
  let s: TestServer;
  let token: string;
  let sweepToken: string | undefined;
  const ids = new Map<string, string>();

  const run = (unit: string, cmd: string[], opts = {}) => execHttp(s.url, token, unit, cmd, opts);
  async function create(name: string, { boot = true, as = token } = {}): Promise<string> {
    const r = await s.api("POST", "/v1/units", { token: as, json: { name } });
    assert.equal(r.status, 201, r.text);
    ids.set(name, r.body.id);
    if (boot) {
      const r = await execHttp(s.url, as, name, ["true"]);
      assert.equal(r.exitCode, 0, `${name} boots: ${r.status} ${r.body}`);
    }
    return r.body.id;
  }

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    // A short warm → cold time: the idle sweep's stop of a paused storm is measured below.
    s = await startTestServer(sqlite, { idleCold: `${IDLE_COLD_S}s`, sweepMs: 250 });
    token = await s.token("fair");
    await create("calm");
  });
  after(async () => {
    // The storm ends with its unit whatever happened above (close deletes every unit too).
    for (const name of ids.keys()) {
      for (const as of [token, sweepToken]) await s?.api("DELETE", `/v1/units/${name}`, { token: as }).catch(() => {});
    }
    await s?.close();
  });

  it("gives a unit the server's default limits: 1,024 processes and one core", async () => {
    const id = await create("limits");
    const pids = await unitCgroup("pids", id);
    const cpu = await unitCgroup("cpu", id);
    assert.ok(pids && cpu, "the unit has its pids and cpu cgroups");
    assert.equal(await readNumber(`${pids}/pids.max`), 1024);
    const quota = await readNumber(`${cpu}/cpu.cfs_quota_us`);
    const period = await readNumber(`${cpu}/cpu.cfs_period_us`);
    assert.equal(quota / period, 1, `cfs quota ${quota} / period ${period} is one core`);
    const policy = await s.api("GET", "/v1/units/limits/policy/resources", { token });
    assert.equal(policy.body.pids.limit, 1024);
    assert.deepEqual(policy.body.cpu, { cores: 1 });
  });

  it("changes only what a policy POST names, at boot and live, and keeps the rest", async () => {
    const id = await create("policy", { boot: false });
    const post = async (json: unknown) => {
      const r = await s.api("POST", "/v1/units/policy/policy/resources", { token, json });
      assert.equal(r.status, 200, r.text);
      return r.body;
    };
    await post({ pids: { limit: 300 } });
    const mem = await post({ memory: { limit_mb: 256 } });
    assert.deepEqual(mem.pids, { limit: 300 }, "a POST naming only memory keeps the pids limit");
    assert.deepEqual(mem.memory, { limit_mb: 256 });
    const all = await post({ cpu: { cores: 0.5 } });
    assert.deepEqual(all, {
      memory: { limit_mb: 256 },
      pids: { limit: 300 },
      cpu: { cores: 0.5 },
      disk: { limit_mb: DEFAULT_UNIT_DISK_MB },
    });
    assert.deepEqual((await s.api("GET", "/v1/units/policy/policy/resources", { token })).body, all);

    // The boot applies the stored policy.
    assert.equal((await run("policy", ["true"])).exitCode, 0);
    const pids = await unitCgroup("pids", id);
    const cpu = await unitCgroup("cpu", id);
    const memory = await unitCgroup("memory", id);
    assert.ok(pids && cpu && memory);
    const cores = async () =>
      (await readNumber(`${cpu}/cpu.cfs_quota_us`)) / (await readNumber(`${cpu}/cpu.cfs_period_us`));
    assert.equal(await readNumber(`${pids}/pids.max`), 300);
    assert.equal(await cores(), 0.5);
    assert.equal(await readNumber(`${memory}/memory.limit_in_bytes`), 256 * 1024 * 1024);

    // A running unit gets a change at once, and keeps the rest.
    await post({ pids: { limit: 400 } });
    assert.equal(await readNumber(`${pids}/pids.max`), 400);
    assert.equal(await cores(), 0.5);
    assert.equal(await readNumber(`${memory}/memory.limit_in_bytes`), 256 * 1024 * 1024);
    await post({ cpu: { cores: 1.25 } });
    assert.equal(await cores(), 1.25);
    assert.equal(await readNumber(`${pids}/pids.max`), 400);

    // DELETE reverts everything to the defaults, live too.
    const reset = await s.api("DELETE", "/v1/units/policy/policy/resources", { token });
    assert.equal(reset.status, 200);
    assert.deepEqual(reset.body.pids, { limit: 1024 });
    assert.deepEqual(reset.body.cpu, { cores: 1 });
    assert.equal(await readNumber(`${pids}/pids.max`), 1024);
    assert.equal(await cores(), 1);
  });

  it("refuses CPU limits that are not a positive number of cores the host has, with 400s", async () => {
    for (const cores of [0, -1, 10_000]) {
      const r = await s.api("POST", "/v1/units/calm/policy/resources", { token, json: { cpu: { cores } } });
      assert.equal(r.status, 400, `${cores}: ${r.text}`);
      assert.match(r.body.errors[0], /^cpu\.cores: /, r.text);
    }
    const tooMany = await s.api("POST", "/v1/units/calm/policy/resources", { token, json: { cpu: { cores: 64 } } });
    assert.equal(tooMany.status, 400);
    assert.match(tooMany.body.errors[0], /at most/, tooMany.text);
    const bad = await s.api("POST", "/v1/units/calm/policy/resources", { token, json: { cpu: { cores: "1" } } });
    assert.equal(bad.status, 400);
    // Nothing was half-applied.
    assert.deepEqual((await s.api("GET", "/v1/units/calm/policy/resources", { token })).body.cpu, { cores: 1 });
  });

  it("keeps another unit's exec and the API within 3x of idle under a fork bomb, and kills it in seconds", async () => {
    const stormId = await create("storm");
    const pidsDir = await unitCgroup("pids", stormId);
    assert.ok(pidsDir);
    const calmCensus = await census(pidsDir);
    assert.equal(stormTasks(calmCensus), 0, describeCensus(calmCensus));

    const execTrue = async () => {
      const t = performance.now();
      const r: ExecResult = await run("calm", ["true"]);
      assert.equal(r.exitCode, 0);
      return performance.now() - t;
    };
    const list = async () => {
      const t = performance.now();
      const r = await s.api("GET", "/v1/units", { token });
      assert.equal(r.status, 200);
      return performance.now() - t;
    };
    for (let i = 0; i < 5; i++) await Promise.all([execTrue(), list()]); // warm-up: connections, caches
    const freezer = await unitCgroup("freezer", stormId);
    assert.ok(freezer);
    /** Stops (or lets go) every task of the storm at once: a frozen cgroup takes no CPU. */
    const freeze = async (frozen: boolean) => {
      await writeFile(`${freezer}/freezer.state`, frozen ? "FROZEN" : "THAWED");
      if (!frozen) return;
      await within(10_000, "the storm freezes", async () => {
        return (await readFile(`${freezer}/freezer.state`, "utf8")).trim() === "FROZEN";
      });
    };

    const storm = await openSession(s.url, token, "storm", ["sh", "-c", stormScript(false)]);
    try {
      await filled(pidsDir);
      // Idle and storm in alternating windows, each storm window right after an idle one (the storm
      // frozen): whatever else loads this shared host changes both alike.
      const idleS = { exec: [] as number[], api: [] as number[] };
      const busyS = { exec: [] as number[], api: [] as number[] };
      const end = performance.now() + STORM_MS;
      for (
        let round = 0;
        performance.now() < end || busyS.exec.length < SAMPLES || idleS.exec.length < SAMPLES;
        round++
      ) {
        const into = round % 2 === 0 ? idleS : busyS;
        await freeze(into === idleS);
        await sleep(250);
        const until = performance.now() + WINDOW_MS;
        while (performance.now() < until) {
          into.exec.push(await execTrue());
          into.api.push(await list());
        }
      }
      await freeze(false);
      const idle = { exec: p50(idleS.exec), api: p50(idleS.api), n: idleS.exec.length };
      const busy = { exec: p50(busyS.exec), api: p50(busyS.api), n: busyS.exec.length };
      const peak = await readNumber(`${pidsDir}/pids.current`);
      const cpuDir = await unitCgroup("cpu", stormId);
      const calmCpuDir = await unitCgroup("cpu", ids.get("calm") ?? "");
      // The storm weighs 1/64 of the calm unit while it presses against its limits (within a few
      // seconds of running unfrozen), the calm unit keeps its weight.
      const shares = async () => [
        await readNumber(`${cpuDir}/cpu.shares`),
        await readNumber(`${calmCpuDir}/cpu.shares`),
      ];
      let weights = await shares();
      await within(5_000, "the storm weighs less than the calm unit", async () => {
        weights = await shares();
        return weights[0] === 16;
      }).catch(() => {});
      const detail = `idle (${idle.n} samples) exec ${idle.exec.toFixed(1)} ms, list ${idle.api.toFixed(1)} ms; storm (${busy.n} samples, ${peak} tasks) exec ${busy.exec.toFixed(1)} ms, list ${busy.api.toFixed(1)} ms`;
      process.stderr.write(`fair share: ${detail}\n`);
      assert.ok(peak > 500, `the bomb still fills the unit (${peak} tasks)`);
      assert.ok(busy.exec <= 3 * idle.exec, `unit B's exec p50 within 3x of idle: ${detail}`);
      assert.ok(busy.api <= 3 * idle.api, `the API's list p50 within 3x of idle: ${detail}`);
      assert.deepEqual(weights, [16, 1024], "the storming unit weighs 1/64 of the calm one");

      // Killing the session kills its whole process group, not just the leader (a `timeout` in the
      // unit only ends the leader). The unit's agent answers although its unit storms.
      const start = performance.now();
      const kill = () => s.api("POST", `/v1/units/storm/exec/${storm.id}/kill?signal=SIGKILL&timeout=5`, { token });
      let killed = await kill();
      // With other test files loading this 2-core host too, the storming unit's agent has missed the
      // 10 s answer deadline (504, UMS_AGENT_TIMEOUT) once in a full run: ask once more.
      // The retry finds the unit unhealthy: either its agent answers now (200), or the unit is
      // restarted (its cgroup frozen and killed), and the session is gone with the storm (404).
      const retried = killed.status === 504;
      if (retried) killed = await kill();
      assert.ok(killed.status === 200 || (retried && killed.status === 404), `${killed.status} ${killed.text}`);
      const answerMs = performance.now() - start;
      // The storm's processes, not pids.current against its count before the storm: the unit's
      // agent starts a helper (ums-spawn) a second after it, which may have been after that count.
      let left = new Map<string, number>();
      const tookMs = await within(5_000, "the storm is gone after its session was killed", async () => {
        left = await census(pidsDir);
        return stormTasks(left) === 0;
      }).catch((err: Error) => {
        throw new Error(`${err.message}: ${describeCensus(left)} (before the storm: ${describeCensus(calmCensus)})`);
      });
      process.stderr.write(
        `fair share: the kill was answered in ${answerMs.toFixed(0)} ms; the storm was gone ${tookMs.toFixed(0)} ms later (left: ${describeCensus(left)}; before the storm: ${describeCensus(calmCensus)})\n`,
      );
    } finally {
      // Whatever failed above, the storm goes with its unit.
      if (ids.has("storm")) await s.api("DELETE", "/v1/units/storm", { token }).catch(() => {});
      ids.delete("storm");
      storm.ws.terminate();
    }
  });

  it("ends a storm that outlived its session within seconds of a delete", async () => {
    const id = await create("orphan");
    const pidsDir = await unitCgroup("pids", id);
    assert.ok(pidsDir);
    try {
      // The leader exits at once: the bomb runs on with no session (as it would under `timeout`).
      const r = await run("orphan", ["sh", "-c", stormScript(true)], { user: "root" });
      assert.equal(r.status, 200);
      await filled(pidsDir);
      const start = performance.now();
      const del = await s.api("DELETE", "/v1/units/orphan", { token });
      const deleteMs = performance.now() - start;
      assert.equal(del.status, 204, del.text);
      ids.delete("orphan");
      assert.ok(!existsSync(pidsDir), "the unit's cgroup is gone with it");
      process.stderr.write(`fair share: delete under a storm took ${deleteMs.toFixed(0)} ms\n`);
      assert.ok(deleteMs < 5_000, `delete took ${deleteMs} ms`);
    } finally {
      if (ids.has("orphan")) await s.api("DELETE", "/v1/units/orphan", { token }).catch(() => {});
      ids.delete("orphan");
    }
  });
  it("ends a storm in a unit paused to make room once the idle sweep stops it", async () => {
    // An organization that may run one unit: waking a second pauses the first (storm and all).
    const as = await s.token("sweep", { limits: { runningLimit: 1, warmLimit: 5 } });
    sweepToken = as;
    const id = await create("paused", { as });
    const pidsDir = await unitCgroup("pids", id);
    const freezer = await unitCgroup("freezer", id);
    assert.ok(pidsDir && freezer);
    try {
      const r = await execHttp(s.url, as, "paused", ["sh", "-c", stormScript(true)], { user: "root" });
      assert.equal(r.status, 200);
      await filled(pidsDir);
      const start = performance.now();
      await create("waker", { as });
      const wakeMs = performance.now() - start;
      const unit = await s.api("GET", "/v1/units/paused", { token: as });
      assert.equal(unit.body.status, "warm", "the storming unit was paused to make room");
      assert.equal((await readFile(`${freezer}/freezer.state`, "utf8")).trim(), "FROZEN");
      // The sweep stops it IDLE_COLD_S after the pause: the cgroup must be gone a few seconds later.
      const goneMs = await within((IDLE_COLD_S + 5) * 1000, "the idle sweep ends the paused storm", async () => {
        return !existsSync(pidsDir);
      });
      process.stderr.write(
        `fair share: pausing a storm to make room took ${wakeMs.toFixed(0)} ms (with the boot of another unit); cold ${goneMs.toFixed(0)} ms later\n`,
      );
      await within(5_000, "the unit is recorded cold", async () => {
        return (await s.api("GET", "/v1/units/paused", { token: as })).body.status === "cold";
      });
    } finally {
      for (const name of ["paused", "waker"]) {
        await s.api("DELETE", `/v1/units/${name}`, { token: as }).catch(() => {});
        ids.delete(name);
      }
    }
  });
});
