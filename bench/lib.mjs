// Shared pieces of the benchmarks: a `ums serve` of their own on the shared test pool, deployments
// of `ums serve` processes by role on PostgreSQL, timing and percentiles. Benchmarks print; they
// never fail on slow figures.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, mkdtempSync, openSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { freePort } from "../packages/server/dist/testing/free-port.js";

export { freePort };

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const UMS = join(ROOT, "bin", "ums");

/**
 * CPU time of process `pid` in ms: `own` (utime + stime, all its threads) and `reaped` (cutime +
 * cstime: its children that ended and were waited for), from /proc/<pid>/stat (fields 14-17, in
 * USER_HZ ticks of 10 ms). Throws when the process is gone.
 */
export function procCpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command's name, which may hold spaces and parentheses: from the third on.
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { own: (Number(f[11]) + Number(f[12])) * 10, reaped: (Number(f[13]) + Number(f[14])) * 10 };
}

export function percentile(samples, p) {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

/** The number after `--name` on the command line, or `dflt` when the flag is absent. */
export function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

/**
 * For `--against DIR`: DIR must run its own server, agent and protocol. A checkout whose
 * node_modules is this tree's, linked whole, resolves @ums/* to this tree's packages and compares
 * this tree with itself; bench/against-tree.sh makes one that does not. Exits the bench otherwise.
 */
export function assertOwnPackages(dir) {
  let server = "";
  try {
    server = realpathSync(join(dir, "node_modules", "@ums", "server"));
  } catch {}
  if (server !== realpathSync(join(dir, "packages", "server"))) {
    console.error(
      `--against ${dir}: its @ums/server is ${server || "missing"}, not its own packages/server; make the tree with bench/against-tree.sh`,
    );
    process.exit(2);
  }
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

/**
 * The stop() of every bench server still running, and of what else a benchmark registers with
 * `onSignal`; a Ctrl-C or kill of the benchmark runs them (each must run once however often called).
 */
const toStop = new Set();
export function onSignal(stop) {
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
 * `stop()`, which deletes the units it made and every host resource. `limits` are the org's
 * running and warm limits (default 50 each); `subnets` (2, 4, …) gives it that many consecutive
 * test /24s for more than 64 units running at once.
 */
export async function startBenchServer({ org = "bench", env: extra = {}, limits = {}, subnets = 1 } = {}) {
  const { testImage } = await import("../packages/server/dist/runtime/image/test-image.js");
  const { lockSubnet, lockSubnetRange } = await import("../packages/server/dist/testing/runtime.js");
  const { testServeEnv, cleanupStoppedServer } = await import("../packages/server/dist/testing/host-cleanup.js");
  const image = await testImage({ onProgress: (p) => process.stderr.write(`image: ${p.message}\n`) });
  const dataDir = mkdtempSync(join(tmpdir(), "ums-bench-"));
  const subnet = await lockSubnet();
  const wide = subnets > 1 ? await lockSubnetRange(subnets) : undefined;
  const port = await freePort();
  const env = {
    // The shared pool and test image, this run's subnet; units reach only the fake internet
    // ranges, uplinks untouched, DNS never leaves loopback, the gateway on a free port.
    ...(await testServeEnv(subnet.n)),
    ...(wide && { UMS_UNIT_SUBNET: wide.subnet }),
    PATH: process.env.PATH,
    UMS_DATA_DIR: dataDir,
    UMS_LISTEN: `127.0.0.1:${port}`,
    UMS_LOG_LEVEL: "warn",
    // A bench sends more than a client should (500/s per token): measured, not throttled.
    UMS_RATE_LIMIT_TOKEN: "off",
    UMS_RATE_LIMIT_ORG: "off",
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
    await wide?.unlock();
    rmSync(dataDir, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  let token;
  try {
    token = execFileSync(UMS, ["token", "create", "--org", org], { env }).toString().trim();
    execFileSync(
      UMS,
      [
        "org",
        "set-limits",
        org,
        "--max-units",
        "20000",
        "--running-limit",
        String(limits.running ?? 50),
        "--warm-limit",
        String(limits.warm ?? 50),
      ],
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

// ---------- deployments of `ums serve` processes by role (api-replica.mjs, move.mjs) ----------

const log = (m) => process.stderr.write(`${m}\n`);
const sleep = (t) => new Promise((r) => setTimeout(r, t));

/** Whether `child` was started and has not exited. */
export function running(child) {
  return !!child && child.exitCode === null && child.signalCode === null;
}

/** SIGTERM, then SIGKILL after 10 s; resolves once the process has exited (at once if it is not running). */
export async function stopProcess(child) {
  if (!running(child)) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(t);
}

/** The last 4,000 characters of a file (a server's log), or "" when it cannot be read. */
export function tail(path) {
  try {
    return readFileSync(path, "utf8").slice(-4000);
  } catch {
    return "";
  }
}

/** The rows of one SQL statement on the PostgreSQL database at `url` (a connection of its own). */
export async function query(url, sql, params) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows;
  } finally {
    await c.end();
  }
}

/**
 * Runs `cleanup` (a function that runs once however often it is called) on SIGINT or SIGTERM, then
 * exits 130, and when the run's time cap passes (UMS_BENCH_TIMEOUT_S, default 1800), then exits 1.
 */
export function cleanupOnSignalsAndTimeCap(cleanup) {
  const capMs = Number(process.env.UMS_BENCH_TIMEOUT_S || 1800) * 1000;
  for (const sig of ["SIGINT", "SIGTERM"]) {
    process.once(sig, () => {
      log(`${sig}: cleaning up`);
      cleanup().finally(() => process.exit(130));
    });
  }
  const timer = setTimeout(() => {
    log(`time cap (${capMs / 1000} s) reached: cleaning up`);
    cleanup().finally(() => process.exit(1));
  }, capMs);
  timer.unref();
}

/**
 * The PostgreSQL server a run makes its databases on: UMS_BENCH_DATABASE_URL's, else a private
 * cluster (pgCluster) started here. `createDatabase(what)` makes a database of the run's own
 * (`ums_bench_<what>_<random>`) and returns its URL; `stop()` drops those databases (with force)
 * and stops the private cluster, logging what fails and going on.
 */
export function benchPostgres() {
  let cluster;
  let adminUrl = process.env.UMS_BENCH_DATABASE_URL;
  if (!adminUrl) {
    log("starting a private PostgreSQL cluster");
    cluster = pgCluster();
    adminUrl = cluster.url;
  }
  const databases = [];
  return {
    adminUrl,
    async createDatabase(what) {
      const name = `ums_bench_${what}_${randomBytes(4).toString("hex")}`;
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`create database ${name}`);
      } finally {
        await c.end();
      }
      databases.push(name);
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      return url.toString();
    },
    async stop() {
      for (const name of databases) {
        const c = new pg.Client({ connectionString: adminUrl });
        try {
          await c.connect();
          await c.query(`drop database if exists ${name} with (force)`);
        } catch (e) {
          log(`cleanup: dropping database ${name}: ${e.message}`);
        } finally {
          await c.end().catch(() => {});
        }
      }
      try {
        cluster?.stop();
      } catch (e) {
        log(`cleanup: stopping the PostgreSQL cluster: ${e.message}`);
      }
    },
  };
}

/**
 * The `ums serve` processes of a run, started by role (`--role all|api|node`) on PostgreSQL, each
 * with a data dir (`<dataDirPrefix><name>-` in the temp dir) and a port of its own, its log in
 * `logDir`, and an API token of `org` for one with the API. `servers` lists them in start order
 * (each as soon as its start begins, so that `stopServes` removes what a failed start left).
 */
export function serveGroup({ org, logDir, dataDirPrefix = "ums-bench-" }) {
  const servers = [];
  let stopping = false;

  /**
   * Starts `ums serve --role ROLE` (`env` added, last) with a data dir and a port (for a node, a
   * unit subnet too) of its own, on the test pool's environment with uplinks and egress ranges
   * `none`, and waits until it answers: GET /healthz for one with the API; its endpoint
   * (UMS_NODE_LISTEN, with UMS_NODE_SECRET) and its row in the database for a node. Resolves to
   * the server: name, role, databaseUrl, dataDir, env, url and token (with the API), log, child.
   * `ums`: the command to run (another tree's bin/ums for a bench's `--against`).
   */
  async function startServe(name, role, databaseUrl, env = {}, ums = UMS) {
    const { testServeEnv } = await import("../packages/server/dist/testing/host-cleanup.js");
    const { lockSubnet } = await import("../packages/server/dist/testing/runtime.js");
    const s = { name, role, databaseUrl, dataDir: mkdtempSync(join(tmpdir(), `${dataDirPrefix}${name}-`)) };
    servers.push(s);
    const port = await freePort();
    let unitEnv = { UMS_GATEWAY_PORT: "0" };
    if (role !== "api") {
      const subnet = await lockSubnet();
      s.unlock = subnet.unlock;
      unitEnv = await testServeEnv(subnet.n);
    }
    s.env = {
      ...unitEnv,
      PATH: process.env.PATH,
      UMS_DATA_DIR: s.dataDir,
      UMS_DATABASE_URL: databaseUrl,
      UMS_ROLE: role,
      UMS_LISTEN: `127.0.0.1:${port}`,
      UMS_LOG_LEVEL: "warn",
      // Workplace rule for benches: units reach nothing outside the host, the uplinks stay untouched.
      UMS_UPLINKS: "none",
      UMS_EGRESS_RANGES: "none",
      UMS_DNS_UPSTREAM: "127.0.0.1:9",
      ...env,
    };
    if (role !== "node") {
      s.url = `http://127.0.0.1:${port}`;
      s.token = (await run(ums, ["token", "create", "--org", org], { timeoutMs: 60_000, env: s.env })).trim();
    }
    s.log = join(logDir, `${name}.log`);
    s.ums = ums;
    return launch(s);
  }

  /**
   * Starts a server of this group again, on its data dir, port and environment (after it exited or
   * was killed), and waits until it answers as `startServe` does.
   */
  async function restartServe(s) {
    if (running(s.child)) throw new Error(`ums serve --role ${s.role} (${s.name}) is still running`);
    return launch(s);
  }

  async function launch(s) {
    // No process once stopServes has begun (a Ctrl-C during a start): it would outlive the run.
    if (stopping) throw new Error(`ums serve --role ${s.role} (${s.name}): not started, the run is stopping`);
    const fd = openSync(s.log, "a");
    // Its own process group: a Ctrl-C in the terminal reaches the benchmark, whose cleanup deletes
    // the units before it stops the servers.
    s.child = spawn(s.ums, ["serve"], { env: s.env, stdio: ["ignore", fd, fd], detached: true });
    closeSync(fd);
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (await ready(s).catch(() => false)) return s;
      if (!running(s.child) || Date.now() > deadline) {
        throw new Error(
          `ums serve --role ${s.role} (${s.name}) did not start: ${running(s.child) ? "no answer" : "it exited"}\n${tail(s.log)}`,
        );
      }
      await sleep(100);
    }
  }

  async function ready(s) {
    if (s.role !== "node") return (await fetch(`${s.url}/healthz`)).ok;
    const endpoint = s.env.UMS_NODE_LISTEN;
    const r = await fetch(`http://${endpoint}/node/v1/call/resourceLimits`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.env.UMS_NODE_SECRET}`, "content-type": "application/json" },
      body: '{"args":[]}',
    });
    await r.arrayBuffer();
    if (!r.ok) return false;
    // Registered (the endpoint listens a moment before the node's row is written).
    const rows = await query(s.databaseUrl, "select count(*)::int as n from nodes where address = $1", [endpoint]);
    return rows[0].n === 1;
  }

  /**
   * Removes everything the servers hold: the `units` (by name) through each server with the API
   * that still runs (their containers, networks and disks go with them), then the processes by PID
   * (those with the API first: nothing calls a node that is gone; then in reverse start order;
   * SIGTERM, SIGKILL after 10 s), then what stopped servers leave on the host
   * (cleanupStoppedServer; removeServerHostResources for an API process), their subnets and data
   * dirs. Logs what fails and goes on.
   */
  async function stopServes({ units = [] } = {}) {
    stopping = true;
    for (const s of servers) {
      if (!s.token || !s.url || !running(s.child)) continue;
      for (const unit of units) {
        await fetch(`${s.url}/v1/units/${unit}`, {
          method: "DELETE",
          headers: { authorization: `Bearer ${s.token}` },
          signal: AbortSignal.timeout(30_000),
        }).catch((e) => log(`cleanup: deleting unit ${unit} through ${s.name}: ${e.message}`));
      }
    }
    for (const s of [...servers].reverse().sort((a, b) => (a.role === "api" ? -1 : b.role === "api" ? 1 : 0))) {
      await stopProcess(s.child);
    }
    const hc = await import("../packages/server/dist/testing/host-cleanup.js");
    for (const s of servers) {
      try {
        if (s.role !== "api") await hc.cleanupStoppedServer(s.dataDir, s.databaseUrl);
        else await hc.removeServerHostResources(s.dataDir);
      } catch (e) {
        log(`cleanup of ${s.name}: ${e.message}`);
      }
      await s.unlock?.();
      rmSync(s.dataDir, { recursive: true, force: true });
    }
  }

  return { servers, startServe, restartServe, stopServes };
}

/**
 * The flags of a bench that takes `--json`, `--help` and positive whole numbers (`numeric`, without
 * their `--`): `--help` prints `usage` and exits 0; anything else wrong prints what, then `usage`,
 * and exits 2.
 */
export function parseBenchFlags(usage, numeric, argv = process.argv.slice(2), strings = []) {
  const wrong = (problem) => {
    console.error(`${problem}\n\n${usage}`);
    process.exit(2);
  };
  const flags = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--help" || a === "-h") {
      console.log(usage);
      process.exit(0);
    }
    if (a === "--json") flags.json = true;
    else if (strings.includes(a.slice(2)) && a.startsWith("--") && i + 1 < argv.length) flags[a.slice(2)] = argv[++i];
    else if (numeric.includes(a.slice(2)) && a.startsWith("--") && i + 1 < argv.length) {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v <= 0) wrong(`${a}: a positive whole number, not '${argv[i]}'`);
      flags[a.slice(2)] = v;
    } else wrong(`unknown argument or missing value '${a}'`);
  }
  return flags;
}

/** Test /24s a bench server needs for `running` units at once (about 60 each), a power of 2 for lockSubnetRange. */
export const subnetsFor = (running) => (running > 60 ? 2 ** Math.ceil(Math.log2(Math.ceil(running / 60))) : 1);

/**
 * The run's time cap (`UMS_BENCH_TIMEOUT_S`, else `defaultS`): the units and the server go, then
 * the bench exits 1. Returns its timer (clearTimeout at the end of a run that went well).
 */
export function capRun(bench, defaultS) {
  const capMs = Number(process.env.UMS_BENCH_TIMEOUT_S || defaultS) * 1000;
  const cap = setTimeout(() => {
    log(`time cap (${capMs / 1000} s) reached: deleting the units and stopping ums serve`);
    void bench.stop().finally(() => process.exit(1));
  }, capMs);
  cap.unref();
  return cap;
}

/** Creates unit `name` on a bench server (201 or an error); returns its id. */
export async function createUnit({ url, auth }, name) {
  const r = await fetch(`${url}/v1/units`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name }),
  });
  const text = await r.text();
  if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${text}`);
  return JSON.parse(text).id;
}

/** Runs `true` in unit `name` over HTTP exec; an error unless it answers and exits 0. */
export async function execTrue({ url, auth }, name) {
  const r = await fetch(`${url}/v1/units/${name}/exec?cmd=true`, { method: "POST", headers: auth });
  const body = Buffer.from(await r.arrayBuffer());
  // The body ends with the exit frame [3, code].
  if (r.status !== 200 || body.at(-2) !== 3 || body.at(-1) !== 0) {
    throw new Error(`exec in ${name}: ${r.status} ${body.toString()}`);
  }
}

/**
 * nginx as a reverse proxy, the reference of issue #16 parts 2 and 3: Debian's package, installed by
 * scripts/lib/common.sh (ensure_nginx) without its service, run in the foreground with a config of
 * its own in a temp dir: one worker, keep-alive connections to `upstream` (`host:port`), no logs, no
 * buffering, each of `headers` set on the requests it forwards. It listens on `listen` (`ip:port`;
 * a free port on 127.0.0.1 by default), in network namespace `netns` if given (the host must reach
 * `listen`). Answers once a GET of `probe` through it answers.
 */
export async function startNginx({ upstream, listen, netns, headers = {}, probe = "/small" }) {
  const installed = spawnSync("bash", ["-c", "source scripts/lib/common.sh && ensure_nginx"], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (installed.status !== 0) throw new Error("nginx could not be installed (scripts/lib/common.sh ensure_nginx)");
  const dir = mkdtempSync(join(tmpdir(), "ums-bench-nginx-"));
  const at = listen ?? `127.0.0.1:${await freePort()}`;
  const temp = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((t) => `${t}_temp_path ${dir}/${t};`).join(" ");
  const set = Object.entries(headers)
    .map(([k, v]) => `proxy_set_header ${k} "${v}";`)
    .join(" ");
  writeFileSync(
    join(dir, "nginx.conf"),
    `daemon off; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off; ${temp}
  upstream target { server ${upstream}; keepalive 64; }
  server {
    listen ${at};
    location / { proxy_pass http://target; proxy_http_version 1.1; proxy_set_header Connection ""; ${set} proxy_buffering off; }
  }
}
`,
  );
  const argv = ["nginx", "-p", dir, "-c", join(dir, "nginx.conf")];
  // `ip netns exec` execs nginx: the child is nginx itself (its master), stopped by SIGQUIT.
  const cmd = netns ? ["ip", "netns", "exec", netns, ...argv] : argv;
  const child = spawn(cmd[0], cmd.slice(1), { stdio: ["ignore", "ignore", "inherit"] });
  children.add(child);
  const stop = () => {
    child.kill("SIGQUIT");
    children.delete(child);
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    const up = await new Promise((resolve) => {
      http.get(`http://${at}${probe}`, (res) => resolve(res.resume() && true)).on("error", () => resolve(false));
    });
    if (up) break;
    if (i > 100 || child.exitCode !== null) {
      stop();
      throw new Error("nginx did not start");
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `http://${at}`, stop };
}
