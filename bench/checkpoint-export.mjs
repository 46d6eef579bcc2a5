#!/usr/bin/env node
// Checkpoint export benchmark (issue #15). No `ums serve`: it calls the replication module
// (packages/server/dist/replication) against an S3-compatible test server (s3rver, in a child
// process on 127.0.0.1) and prints each figure with its ratio to a baseline of the same run:
//
//   1. full export: a subvolume of --mib MiB (half random, half compressible text) on the shared
//      test pool, snapshotted read-only, exported to the store (btrfs send | zstd, in parts of a
//      multipart upload), against `btrfs send | zstd -T0 -1 > file` on the disk the store writes
//      to; --runs times each, alternating, median. Goal: export rate >= 70 % of the pipe's.
//   2. incremental export: --change-mib MiB of the random file rewritten, a new checkpoint taken
//      and exported against the one before (btrfs send -p); --runs times, median and worst,
//      against `btrfs send -p | zstd > file` of the same pair. Goal: <= 1 s.
//
//   node bench/checkpoint-export.mjs [--mib 1024] [--runs 3] [--change-mib 10] [--json]
//
// Progress goes to stderr, results to stdout. It only reports: slow figures print MISS. It exits
// non-zero when something is broken (the server does not start, an export fails). Everything it
// makes (subvolumes on the pool, the store's files, temp files, the server) is removed at the end,
// on error, on Ctrl-C / SIGTERM and at the time cap (UMS_BENCH_TIMEOUT_S, default 1800).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { children, killChildren, parseBenchFlags, percentile, procCpuMs, run } from "./lib.mjs";

const USAGE = `usage: node bench/checkpoint-export.mjs [options]

  --mib M          size of the exported subvolume, MiB (default 1024; half random, half text)
  --runs N         timed runs of each figure and of its baseline (default 3)
  --change-mib C   MiB rewritten before each incremental checkpoint (default 10)
  --json           also print one JSON object with all figures (last line of stdout)
  --help           this text

env: UMS_BENCH_TIMEOUT_S (default 1800) caps the whole run.`;

// ---------- flags ----------

const flags = parseBenchFlags(USAGE, ["mib", "runs", "change-mib"]);
const SIZE_MIB = flags.mib ?? 1024;
const RUNS = flags.runs ?? 3;
const CHANGE_MIB = flags["change-mib"] ?? 10;
const RANDOM_MIB = Math.max(CHANGE_MIB, Math.floor(SIZE_MIB / 2));
const TEXT_MIB = Math.max(1, SIZE_MIB - RANDOM_MIB);
const RUN_TIMEOUT_MS = Number(process.env.UMS_BENCH_TIMEOUT_S || 1800) * 1000;
const FULL_GOAL = 0.7; // export rate / pipe rate at least
const INCR_GOAL_MS = 1000; // incremental export, median, at most

// ---------- helpers ----------

const log = (msg) => process.stderr.write(`${msg}\n`);
const MiB = 1024 * 1024;
const secs = (x) => (Number.isFinite(x) ? `${(x / 1000).toFixed(2)} s` : "n/a");
const ms = (x) => (Number.isFinite(x) ? `${x.toFixed(0)} ms` : "n/a");
const rate = (bytes, t) => bytes / MiB / (t / 1000);

const sh = (script, ...args) => run("bash", ["-c", `set -o pipefail; ${script}`, "bench", ...args]);
const settle = (pool) => sh('sync && btrfs subvolume sync "$1" >/dev/null', pool);

/** s3rver (or, with `code`, another server) in a child process on 127.0.0.1: not in this one, whose CPU it would share. */
async function startStore(dir, sink = false) {
  const code = sink
    ? SINK
    : `
    import S3rver from "s3rver";
    const s = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory: process.argv[1],
      configureBuckets: [{ name: "bench", configs: [] }] });
    const a = await s.run();
    process.stdout.write(a.port + "\\n");
    process.on("SIGTERM", () => s.close(() => process.exit(0)));`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", code, dir], {
    cwd: new URL("../packages/server/", import.meta.url).pathname,
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.add(child);
  child.on("exit", () => children.delete(child));
  const port = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(Number(out.trim()));
    });
    child.on("exit", (c) => reject(new Error(`the S3 test server exited (${c}) before it listened`)));
  });
  return { child, endpoint: `http://127.0.0.1:${port}` };
}

/**
 * A discarding S3 endpoint in a child process: it answers the calls an export makes (multipart
 * upload, put, head, get of a small object, delete) and throws the bytes away. An export to it
 * shows the exporter's own cost, without s3rver's (a JavaScript server that writes every part,
 * hashes it, and copies the parts into one file when the upload completes).
 */
const SINK = `
import http from "node:http";
const sizes = new Map(); const small = new Map(); let n = 0;
const xml = (res, body) => { res.writeHead(200, { "content-type": "application/xml" }); res.end('<?xml version="1.0" encoding="UTF-8"?>' + body); };
http.createServer((req, res) => {
  const u = new URL(req.url, "http://sink"); const key = decodeURIComponent(u.pathname); const q = u.searchParams;
  let len = 0; const keep = [];
  req.on("data", (c) => { len += c.length; if (len <= 1 << 20) keep.push(c); });
  req.on("end", () => {
    const m = req.method;
    if (m === "POST" && q.has("uploads")) return xml(res, "<InitiateMultipartUploadResult><UploadId>u" + ++n + "</UploadId></InitiateMultipartUploadResult>");
    if (m === "PUT" && q.has("partNumber")) {
      const k = key + "#" + q.get("uploadId"); sizes.set(k, (sizes.get(k) ?? 0) + len);
      res.writeHead(200, { etag: '"p' + q.get("partNumber") + '"' }); return res.end();
    }
    if (m === "POST" && q.has("uploadId")) { sizes.set(key, sizes.get(key + "#" + q.get("uploadId")) ?? 0); return xml(res, '<CompleteMultipartUploadResult><ETag>"c"</ETag></CompleteMultipartUploadResult>'); }
    if (m === "PUT") { sizes.set(key, len); if (len <= 1 << 20) small.set(key, Buffer.concat(keep)); else small.delete(key); res.writeHead(200, { etag: '"o"' }); return res.end(); }
    if (m === "HEAD") { if (!sizes.has(key)) { res.writeHead(404); return res.end(); } res.writeHead(200, { "content-length": sizes.get(key) }); return res.end(); }
    if (m === "GET" && small.has(key)) { res.writeHead(200, { "content-length": small.get(key).length }); return res.end(small.get(key)); }
    if (m === "GET") { res.writeHead(404, { "content-type": "application/xml" }); return res.end("<Error><Code>NoSuchKey</Code><Message>no</Message></Error>"); }
    if (m === "DELETE") { if (!q.has("uploadId")) { sizes.delete(key); small.delete(key); } res.writeHead(204); return res.end(); }
    res.writeHead(400); res.end();
  });
}).listen(0, "127.0.0.1", function () { process.stdout.write(this.address().port + "\\n"); });
`;

/** A file of text that zstd -1 compresses well, but not to nothing (log-like lines). */
async function writeText(path, mib) {
  const fh = await open(path, "w");
  try {
    const words = ["GET", "POST", "/v1/units", "200", "404", "ok", "slow", "unit", "checkpoint", "bench"];
    for (let m = 0; m < mib; m++) {
      let s = "";
      while (s.length < MiB) {
        const n = Math.floor(Math.random() * 1e6);
        s += `2026-11-28T18:${String(m % 60).padStart(2, "0")} ${words[n % 10]} ${words[(n >> 4) % 10]} id=${n} ${words[(n >> 8) % 10]}\n`;
      }
      await fh.write(s.slice(0, MiB));
    }
  } finally {
    await fh.close();
  }
}

// ---------- state and cleanup ----------

const dist = (p) => new URL(`../packages/server/dist/${p}`, import.meta.url).href;
let scratch; // this run's directory on the pool
let tmp; // this run's temp dir: the store's files and the baseline's output
const clients = []; // the S3ObjectStore clients
let cleaning;
function cleanup() {
  cleaning ??= (async () => {
    killChildren();
    for (const c of clients) c.destroy();
    if (scratch) await scratch.remove().catch((e) => log(`cleanup: ${e.message}`));
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.once(sig, () => {
    log(`${sig}: cleaning up`);
    cleanup().finally(() => process.exit(130));
  });
}
const timer = setTimeout(() => {
  log(`time cap (${RUN_TIMEOUT_MS / 1000} s) reached: cleaning up`);
  cleanup().finally(() => process.exit(1));
}, RUN_TIMEOUT_MS);
timer.unref();

// ---------- the run ----------

const results = {};
let ok = true;
try {
  const { S3ObjectStore } = await import(dist("replication/object-store.js"));
  const { exportCheckpoint, deleteExport } = await import(dist("replication/export.js"));
  const { poolScratch, checkpointOf, makeSubvolume } = await import(dist("replication/test-fixtures.js"));
  tmp = mkdtempSync(join(tmpdir(), "ums-bench-export-"));
  scratch = await poolScratch("bench");
  const storeAt = (endpoint) => {
    const c = new S3ObjectStore({
      endpoint,
      region: "us-east-1",
      bucket: "bench",
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    clients.push(c);
    return c;
  };
  const servers = { s3rver: await startStore(join(tmp, "s3")), sink: await startStore(tmp, true) };
  const stores = { s3rver: storeAt(servers.s3rver.endpoint), sink: storeAt(servers.sink.endpoint) };
  const poolDir = scratch.dir.split("/replication-tests/")[0];
  const live = join(scratch.dir, "live");
  const stateDir = join(tmp, "state");
  const baselineOut = join(tmp, "baseline.zst");
  await makeSubvolume(live);
  log(`writing ${RANDOM_MIB} MiB random + ${TEXT_MIB} MiB text into ${live}`);
  await sh('head -c "$1" /dev/urandom > "$2"', String(RANDOM_MIB * MiB), join(live, "random.bin"));
  await writeText(join(live, "text.log"), TEXT_MIB);
  const cp = (n) => `cp${n}`;
  const snap = (n) => join(scratch.dir, cp(n));
  await checkpointOf(live, snap(0));
  await settle(poolDir);

  // Figure 1: full export, to s3rver and to the discarding endpoint, against btrfs send | zstd > file.
  const times = { pipe: [], s3rver: [], sink: [] };
  const cpus = { pipe: [], s3rver: [], sink: [] };
  const kinds = Object.keys(times);
  let manifest;
  log(`full: ${RUNS} runs each (one untimed warm-up of each)`);
  for (let i = 0; i <= RUNS; i++) {
    for (let k = 0; k < kinds.length; k++) {
      const which = kinds[(k + i) % kinds.length];
      await settle(poolDir);
      const t = performance.now();
      const cpu0 = {
        self: procCpuMs(process.pid),
        store: which === "pipe" ? 0 : procCpuMs(servers[which].child.pid).own,
      };
      if (which === "pipe") {
        await sh('btrfs send -q "$1" | zstd -q -c -T0 -1 > "$2"', snap(0), baselineOut);
      } else {
        const store = stores[which];
        manifest = (
          await exportCheckpoint({ store, unitId: "bench", checkpointId: cp(0), snapshotPath: snap(0), stateDir })
        ).manifest;
      }
      const took = performance.now() - t;
      const cpu1 = procCpuMs(process.pid);
      const cpu = {
        exporter: cpu1.own - cpu0.self.own,
        tools: cpu1.reaped - cpu0.self.reaped,
        store: which === "pipe" ? 0 : procCpuMs(servers[which].child.pid).own - cpu0.store,
      };
      if (i > 0) times[which].push(took);
      if (i > 0) cpus[which].push(cpu);
      log(
        `  ${i === 0 ? "warm-up " : ""}${which}: ${secs(took)}  (CPU: tools ${secs(cpu.tools)}, exporter ${secs(cpu.exporter)}, store ${secs(cpu.store)})`,
      );
      if (which === "pipe") rmSync(baselineOut, { force: true });
      // The last export stays: the parent of figure 2's.
      else if (i < RUNS) await deleteExport({ store: stores[which], checkpointId: cp(0) });
    }
  }
  const bytes = manifest.uncompressedBytes;
  const rateOf = (which) => rate(bytes, percentile(times[which], 50));
  results.full = {
    stream_mib: bytes / MiB,
    compressed_mib: manifest.compressedBytes / MiB,
    parts: manifest.parts.length,
    pipe_ms_p50: percentile(times.pipe, 50),
    s3rver_ms_p50: percentile(times.s3rver, 50),
    sink_ms_p50: percentile(times.sink, 50),
    pipe_mib_s: rateOf("pipe"),
    s3rver_mib_s: rateOf("s3rver"),
    sink_mib_s: rateOf("sink"),
    s3rver_ratio: rateOf("s3rver") / rateOf("pipe"),
    sink_ratio: rateOf("sink") / rateOf("pipe"),
    goal_min_ratio: FULL_GOAL,
    pass: rateOf("s3rver") / rateOf("pipe") >= FULL_GOAL,
  };

  // Figure 2: incremental exports after rewriting CHANGE_MIB MiB, to both.
  const incr = { pipe: [], s3rver: [], sink: [] };
  const incrBytes = [];
  log(`incremental: ${RUNS} checkpoints, ${CHANGE_MIB} MiB rewritten before each`);
  for (let n = 1; n <= RUNS; n++) {
    const seek = Math.floor(Math.random() * (RANDOM_MIB - CHANGE_MIB + 1));
    const fh = await open(join(live, "random.bin"), "r+");
    try {
      for (let k = 0; k < CHANGE_MIB; k++) await fh.write(randomBytes(MiB), 0, MiB, (seek + k) * MiB);
    } finally {
      await fh.close();
    }
    await checkpointOf(live, snap(n));
    await settle(poolDir);
    for (const which of kinds) {
      const t = performance.now();
      if (which === "pipe") {
        await sh('btrfs send -q -p "$1" "$2" | zstd -q -c -T0 -1 > "$3"', snap(n - 1), snap(n), baselineOut);
        rmSync(baselineOut, { force: true });
      } else {
        const r = await exportCheckpoint({
          store: stores[which],
          unitId: "bench",
          checkpointId: cp(n),
          snapshotPath: snap(n),
          parent: { checkpointId: cp(n - 1), snapshotPath: snap(n - 1) },
          stateDir,
        });
        if (which === "s3rver") incrBytes.push(r.manifest.compressedBytes);
      }
      incr[which].push(performance.now() - t);
    }
    log(
      `  ${cp(n)} (${(incrBytes.at(-1) / MiB).toFixed(1)} MiB): pipe ${ms(incr.pipe.at(-1))}, s3rver ${ms(incr.s3rver.at(-1))}, sink ${ms(incr.sink.at(-1))}`,
    );
  }
  results.incremental = {
    change_mib: CHANGE_MIB,
    compressed_mib_p50: percentile(incrBytes, 50) / MiB,
    pipe_ms_p50: percentile(incr.pipe, 50),
    s3rver_ms_p50: percentile(incr.s3rver, 50),
    s3rver_ms_max: Math.max(...incr.s3rver),
    sink_ms_p50: percentile(incr.sink, 50),
    goal_max_ms: INCR_GOAL_MS,
    pass: percentile(incr.s3rver, 50) <= INCR_GOAL_MS,
  };
} catch (err) {
  ok = false;
  log(`ERROR: ${err?.stack ?? err}`);
} finally {
  await cleanup();
}

console.log("\nums checkpoint export benchmark, issue #15 (ratios: against a baseline of the same run, same host)");
if (results.full) {
  const f = results.full;
  console.log(
    `  full export of ${f.stream_mib.toFixed(0)} MiB of send stream (${f.compressed_mib.toFixed(0)} MiB compressed, ${f.parts} parts), median of ${RUNS}:`,
  );
  console.log(`    btrfs send | zstd -T0 -1 > file:       ${secs(f.pipe_ms_p50)}  ${f.pipe_mib_s.toFixed(0)} MiB/s`);
  console.log(
    `    export to the store (s3rver):          ${secs(f.s3rver_ms_p50)}  ${f.s3rver_mib_s.toFixed(0)} MiB/s  ${f.s3rver_ratio.toFixed(2)}x  [goal >= ${FULL_GOAL.toFixed(2)}x: ${f.pass ? "PASS" : "MISS"}]`,
  );
  console.log(
    `    export to a discarding S3 endpoint:    ${secs(f.sink_ms_p50)}  ${f.sink_mib_s.toFixed(0)} MiB/s  ${f.sink_ratio.toFixed(2)}x  (the exporter's own cost)`,
  );
}
if (results.incremental) {
  const r = results.incremental;
  console.log(
    `  incremental export after rewriting ${r.change_mib} MiB (${r.compressed_mib_p50.toFixed(1)} MiB compressed), median of ${RUNS}:`,
  );
  console.log(`    btrfs send -p | zstd > file:        ${ms(r.pipe_ms_p50)}`);
  console.log(
    `    export to the store (s3rver):       ${ms(r.s3rver_ms_p50)} (worst ${ms(r.s3rver_ms_max)})  [goal <= ${INCR_GOAL_MS} ms: ${r.pass ? "PASS" : "MISS"}]`,
  );
  console.log(`    export to a discarding S3 endpoint: ${ms(r.sink_ms_p50)}`);
}
console.log(`load: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
if (flags.json) console.log(JSON.stringify({ ok, ...results }));
process.exit(ok ? 0 : 1);
