// Issue #17: the sampler's pure logic (averages, buckets, retention, limit edges) on fake kernel
// files in a temporary directory; no unit, no root needed.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import type { UsageStore } from "../store/store.js";
import { KernelFiles } from "./kernel-files.js";
import {
  AVG_KEEP_MS,
  AVG_STEP_S,
  averageSamples,
  RAW_KEEP_MS,
  RAW_STEP_S,
  Rollup,
  type UsageSample,
} from "./sample.js";
import { UsageSampler } from "./sampler.js";

const sample = (at: number, over: Partial<UsageSample> = {}): UsageSample => ({
  at,
  cpuCores: 1,
  memoryBytes: 100,
  memoryPeakBytes: 100,
  memoryLimitBytes: 1000,
  diskBytes: 10,
  diskLimitBytes: 50,
  netRxBps: 0,
  netTxBps: 0,
  pids: 2,
  ...over,
});

describe("usage averages and buckets (issue #17)", () => {
  it("averages the measures, keeps the highest peak and the last limits", () => {
    const avg = averageSamples(0, [
      sample(1, { cpuCores: 0.5, memoryBytes: 100, memoryPeakBytes: 300, netRxBps: 10, pids: 1 }),
      sample(2, { cpuCores: 1.5, memoryBytes: 300, memoryPeakBytes: 200, netRxBps: 30, pids: 4, diskBytes: null }),
      sample(3, { cpuCores: 1, memoryBytes: 200, memoryPeakBytes: 100, memoryLimitBytes: null, diskBytes: 30 }),
    ]);
    assert.equal(avg.at, 0);
    assert.equal(avg.cpuCores, 1);
    assert.equal(avg.memoryBytes, 200);
    assert.equal(avg.memoryPeakBytes, 300);
    assert.equal(avg.memoryLimitBytes, null);
    assert.equal(avg.diskBytes, 20, "samples without a disk figure are left out of its average");
    assert.equal(avg.netRxBps, 40 / 3);
    assert.equal(avg.pids, 7 / 3);
    assert.throws(() => averageSamples(0, []));
  });

  it("hands out a 5-minute bucket's average when the next bucket starts, or at a flush", () => {
    const r = new Rollup();
    const step = AVG_STEP_S * 1000;
    assert.equal(r.add("u", sample(step + 10_000, { cpuCores: 1 })), undefined);
    assert.equal(r.add("u", sample(step + 20_000, { cpuCores: 3 })), undefined);
    assert.equal(r.add("v", sample(step + 20_000)), undefined);
    const done = r.add("u", sample(2 * step + 1, { cpuCores: 5 }));
    assert.equal(done?.at, step);
    assert.equal(done?.cpuCores, 2);
    assert.equal(r.flush("u")?.cpuCores, 5);
    assert.equal(r.flush("u"), undefined);
    assert.deepEqual([...r.units()], ["v"]);
  });
});

/** A store in memory that keeps what it was given. */
function memoryStore(): UsageStore & {
  rows: { step: number; unitId: string; sample: UsageSample }[];
  prunes: number[][];
} {
  const rows: { step: number; unitId: string; sample: UsageSample }[] = [];
  const prunes: number[][] = [];
  return {
    rows,
    prunes,
    async add(step, add) {
      for (const r of add) rows.push({ step, ...r });
    },
    async list(unitId, step, since) {
      return rows.filter((r) => r.unitId === unitId && r.step === step && r.sample.at >= since).map((r) => r.sample);
    },
    async prune(step, beforeMs) {
      prunes.push([step, beforeMs]);
      return 0;
    },
  };
}

describe("the usage sampler on fake kernel files (issue #17)", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ums-usage-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const fakeUnit = async (id: string) => {
    const root = join(dir, id);
    const sources = {
      cpuacct: join(root, "cpuacct"),
      memory: join(root, "memory"),
      pids: join(root, "pids"),
      netStats: join(root, "net"),
      qgroup: join(root, "qgroup"),
    };
    for (const d of Object.values(sources)) await mkdir(d, { recursive: true });
    const set = async (v: {
      cpuNs: number;
      usage: number;
      inactive?: number;
      failcnt?: number;
      disk?: number;
      rx?: number;
      tx?: number;
    }) => {
      await writeFile(join(sources.cpuacct, "cpuacct.usage"), `${v.cpuNs}\n`);
      await writeFile(join(sources.memory, "memory.usage_in_bytes"), `${v.usage}\n`);
      await writeFile(join(sources.memory, "memory.max_usage_in_bytes"), `${v.usage * 2}\n`);
      await writeFile(join(sources.memory, "memory.limit_in_bytes"), "9223372036854771712\n");
      await writeFile(
        join(sources.memory, "memory.stat"),
        `cache 5\nrss 7\ninactive_file 3\ntotal_cache 5\ntotal_inactive_file ${v.inactive ?? 0}\ntotal_active_file 1\n`,
      );
      await writeFile(join(sources.memory, "memory.failcnt"), `${v.failcnt ?? 0}\n`);
      await writeFile(join(sources.pids, "pids.current"), "3\n");
      await writeFile(join(sources.netStats, "rx_bytes"), `${v.tx ?? 0}\n`);
      await writeFile(join(sources.netStats, "tx_bytes"), `${v.rx ?? 0}\n`);
      await writeFile(join(sources.qgroup, "referenced"), `${v.disk ?? 0}\n`);
      await writeFile(join(sources.qgroup, "max_referenced"), "1000\n");
    };
    return { sources, set };
  };

  it("turns two readings into a sample: cores, working set, rates; the first sighting primes only", async () => {
    const store = memoryStore();
    const u = await fakeUnit("a");
    const running = ["a"];
    const limits: string[] = [];
    const sampler = new UsageSampler({
      store,
      running: () => running,
      sources: (id) => (id === "a" ? u.sources : undefined),
      log: pino({ level: "silent" }),
    });
    sampler.onLimitReached = (id, kind) => limits.push(`${id}:${kind}`);
    await u.set({ cpuNs: 1e9, usage: 5000, inactive: 1000, rx: 100, tx: 0, disk: 10 });
    sampler.tick(100_000);
    await u.set({ cpuNs: 6e9, usage: 9000, inactive: 1000, rx: 10_100, tx: 500, disk: 10 });
    sampler.tick(110_000);
    await sampler.stop();
    const raw = store.rows.filter((r) => r.step === RAW_STEP_S);
    assert.equal(raw.length, 1);
    const s = raw[0]?.sample as UsageSample;
    assert.equal(s.at, 110_000);
    assert.equal(s.cpuCores, 0.5);
    assert.equal(s.memoryBytes, 8000);
    assert.equal(s.memoryPeakBytes, 18000);
    assert.equal(s.memoryLimitBytes, null, "cgroup v1's no-limit value is no limit");
    assert.equal(s.netRxBps, 1000);
    assert.equal(s.netTxBps, 50);
    assert.equal(s.pids, 3);
    assert.equal(s.diskBytes, 10);
    assert.equal(s.diskLimitBytes, 1000);
    assert.deepEqual(limits, []);
    // Retention: raw samples an hour, averages 7 days.
    assert.deepEqual(store.prunes, [
      [RAW_STEP_S, 100_000 - RAW_KEEP_MS],
      [AVG_STEP_S, 100_000 - AVG_KEEP_MS],
    ]);
  });

  it("tells onLimitReached once per episode, and writes a stopped unit's partial average", async () => {
    const store = memoryStore();
    const u = await fakeUnit("b");
    let running = ["b"];
    const limits: string[] = [];
    const sampler = new UsageSampler({
      store,
      running: () => running,
      sources: () => u.sources,
      log: pino({ level: "silent" }),
    });
    sampler.onLimitReached = (id, kind) => limits.push(`${id}:${kind}`);
    let t = 1_000_000;
    const next = () => {
      t += 10_000;
      sampler.tick(t);
    };
    await u.set({ cpuNs: 0, usage: 1, failcnt: 0, disk: 10 });
    next();
    await u.set({ cpuNs: 0, usage: 1, failcnt: 4, disk: 1000 });
    next();
    await u.set({ cpuNs: 0, usage: 1, failcnt: 9, disk: 1000 });
    next();
    await u.set({ cpuNs: 0, usage: 1, failcnt: 9, disk: 10 });
    next();
    await u.set({ cpuNs: 0, usage: 1, failcnt: 12, disk: 1000 });
    next();
    assert.deepEqual(limits, ["b:memory", "b:disk", "b:memory", "b:disk"]);
    running = [];
    next();
    await sampler.stop();
    assert.equal(store.rows.filter((r) => r.step === AVG_STEP_S).length, 1, "the open bucket is written at the stop");
  });

  it("never follows a symlink: a file that is one reads as missing", async () => {
    await writeFile(join(dir, "target"), "42\n");
    await symlink(join(dir, "target"), join(dir, "link"));
    const f = new KernelFiles();
    assert.equal(f.number(join(dir, "target")), 42);
    assert.equal(f.number(join(dir, "link")), undefined);
    assert.equal(f.number(join(dir, "missing")), undefined);
  });
});
