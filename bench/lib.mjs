// Shared pieces of the benchmarks: a `ums serve` of their own on the shared test pool, timing and
// percentiles. Benchmarks print; they never fail on slow figures.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../packages/server/dist/testing/free-port.js";

export { freePort };

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const UMS = join(ROOT, "bin", "ums");

export function percentile(samples, p) {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

/** The number after `--name` on the command line, or `dflt` when the flag is absent. */
export function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

export const fmt = (ms) => (Number.isFinite(ms) ? `${ms.toFixed(2)} ms` : "n/a");

/** Processes a benchmark started and has not seen exit: `killChildren` ends them (by PID) on cleanup. */
export const children = new Set();

/**
 * Runs a command (with `env`, else this process's environment); resolves to its stdout, rejects
 * with its stderr when it fails (or is killed at `timeoutMs`).
 */
export function run(cmd, args, { timeoutMs, env } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...(env && { env }) });
    children.add(child);
    const timer = timeoutMs && setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      if (err.length < 4000) err += d;
    });
    child.on("error", (e) => {
      children.delete(child);
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code, signal) => {
      children.delete(child);
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(" ")}: ${signal ?? `exit ${code}`}: ${err.trim()}`));
    });
  });
}

/**
 * A private PostgreSQL cluster (scripts/lib/pg-cluster.sh: initdb on a free loopback port in a temp
 * dir, fsync off, as in the tests). Returns its URL (of the `postgres` database) and `stop()`, which
 * stops it and removes its directory.
 */
export function pgCluster() {
  const sh = (script, env = {}) =>
    execFileSync(
      "bash",
      ["-c", `set -euo pipefail; source scripts/lib/common.sh; source scripts/lib/pg-cluster.sh; ${script}`],
      { cwd: ROOT, env: { ...process.env, ...env }, encoding: "utf8" },
    );
  const [dir, url] = sh('pg_cluster_start; echo "$PG_DIR $PG_URL"').trim().split(" ");
  return { url, stop: () => sh("pg_cluster_stop", { PG_DIR: dir }) };
}

/** SIGKILLs every child still running. */
export function killChildren() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
}

export async function timeIt(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** The stop() of every bench server still running; a Ctrl-C or kill of the benchmark runs them. */
const toStop = new Set();
function onSignal(stop) {
  if (toStop.size === 0 && !onSignal.installed) {
    onSignal.installed = true;
    // Cleans up like the end of a run (benchmarks with handlers of their own call the same stop(),
    // which runs once).
    for (const sig of ["SIGINT", "SIGTERM"])
      process.once(sig, () => {
        process.stderr.write(`${sig}: deleting the units and stopping ums serve\n`);
        void Promise.allSettled([...toStop].map((s) => s())).finally(() => process.exit(130));
      });
  }
  toStop.add(stop);
}

/**
 * Starts `ums serve` on the shared test pool and image (built once, cached in
 * /var/tmp/ums-test-pool), with a subnet and data dir of its own. Returns the base URL, a token and
 * `stop()`, which deletes the units it made and every host resource.
 */
export async function startBenchServer({ org = "bench", env: extra = {} } = {}) {
  const { testImage } = await import("../packages/server/dist/runtime/image/test-image.js");
  const { lockSubnet } = await import("../packages/server/dist/testing/runtime.js");
  const { testServeEnv, cleanupStoppedServer } = await import("../packages/server/dist/testing/host-cleanup.js");
  const image = await testImage({ onProgress: (p) => process.stderr.write(`image: ${p.message}\n`) });
  const dataDir = mkdtempSync(join(tmpdir(), "ums-bench-"));
  const subnet = await lockSubnet();
  const port = await freePort();
  const env = {
    // The shared pool and test image, this run's subnet; units reach only the fake internet
    // ranges, uplinks untouched, DNS never leaves loopback, the gateway on a free port.
    ...(await testServeEnv(subnet.n)),
    PATH: process.env.PATH,
    UMS_DATA_DIR: dataDir,
    UMS_LISTEN: `127.0.0.1:${port}`,
    UMS_LOG_LEVEL: "warn",
    ...extra,
  };
  let child;
  // After the server has stopped (or never started): everything its units hold on the host (their
  // containers, networks and disks: units outlive a stopped `ums serve`), its table and cgroups.
  const release = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
    }
    await cleanupStoppedServer(dataDir);
    await subnet.unlock();
    rmSync(dataDir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  let token;
  try {
    token = execFileSync(UMS, ["token", "create", "--org", org], { env }).toString().trim();
    execFileSync(
      UMS,
      ["org", "set-limits", org, "--max-units", "20000", "--running-limit", "50", "--warm-limit", "50"],
      {
        env,
      },
    );
    // Its own process group: a Ctrl-C in the terminal reaches the benchmark, whose stop() deletes the
    // units first, and not the server (which, stopped first, would leave them running on the host).
    child = spawn(UMS, ["serve"], { env, stdio: ["ignore", "ignore", "inherit"], detached: true });
    for (let i = 0; ; i++) {
      try {
        if ((await fetch(`${url}/healthz`)).ok) break;
      } catch {}
      if (child.exitCode !== null || i > 300) throw new Error("ums serve did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    await release();
    throw err;
  }
  const auth = { authorization: `Bearer ${token}` };
  let stopping;
  const stop = () => (stopping ??= stopOnce().finally(() => toStop.delete(stop)));
  onSignal(stop);
  return {
    url,
    token,
    auth,
    dataDir,
    pool: image.pool.path,
    pid: child.pid,
    stop,
  };
  async function stopOnce() {
    try {
      let ct = "";
      const names = [];
      do {
        const page = await (
          await fetch(`${url}/v1/units?max_results=500${ct ? `&continuation_token=${ct}` : ""}`, { headers: auth })
        ).json();
        names.push(...page.sprites.map((u) => u.name));
        ct = page.has_more ? page.next_continuation_token : "";
      } while (ct);
      for (const n of names) await fetch(`${url}/v1/units/${n}`, { method: "DELETE", headers: auth });
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(t);
      }
      await release();
    }
  }
}
