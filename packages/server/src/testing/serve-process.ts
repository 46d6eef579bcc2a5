import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./free-port.js";
import { testServeEnv } from "./host-cleanup.js";
import { lockSubnet, TEST_NETWORK_ENV } from "./runtime.js";

/** The launcher a user runs (`bin/ums` at the repository's root). */
export const UMS_BIN = resolve(fileURLToPath(import.meta.url), "../../../../../bin/ums");

/**
 * Spawns `ums serve` with `env` (which must name where it listens, UMS_LISTEN) and resolves once
 * GET `<base>/healthz` answers (or, when given, once `ready` resolves true: a `--role node` has no
 * API to ask); fails with the server's log if it exits or takes over 90 s (a start takes about a
 * second on a quiet host, but tens of seconds on a loaded 2-core one were seen). Its units reach
 * only the test network (TEST_NETWORK_ENV) unless `env` says otherwise.
 */
export async function spawnServe(
  base: string,
  env: NodeJS.ProcessEnv,
  ready: () => Promise<boolean> = async () => (await fetch(`${base}/healthz`)).ok,
): Promise<ChildProcess> {
  const child = spawn(UMS_BIN, ["serve"], {
    env: { ...TEST_NETWORK_ENV, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr?.on("data", (d) => {
    log += d;
  });
  const t0 = Date.now();
  const deadline = t0 + 90_000;
  for (;;) {
    try {
      if (await ready()) return child;
    } catch {}
    if (child.exitCode !== null || Date.now() > deadline) {
      const why = child.exitCode !== null ? `exited with ${child.exitCode}` : `no answer in ${Date.now() - t0} ms`;
      // One that is still starting goes: left running, it would hold (and re-adopt) units after the
      // test's cleanup, on the host until someone kills it.
      await stopChild(child, "SIGKILL");
      throw new Error(`ums serve did not start (${why}): ${log}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** True while the process has neither exited nor been killed by a signal. */
export function isRunning(child: ChildProcess | undefined): child is ChildProcess {
  return !!child && child.exitCode === null && child.signalCode === null;
}

/** Sends `signal` to `child` and waits for its exit; nothing when it is not running. */
export async function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!isRunning(child)) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill(signal);
  await exited;
}

export interface ServeProcessOpts {
  /** Names the data dir (`ums-<name>-…` in the temp dir). */
  readonly name: string;
  /** The organization the token is made for. */
  readonly org: string;
  /** More environment for every start (UMS_IDLE_WARM, UMS_DNS_UPSTREAM, …). */
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * `ums serve` run as a child process by a test that kills and restarts it (crash safety,
 * re-adoption): a data dir, a loopback port and a test subnet of its own, on the shared test pool,
 * and a token made with `ums token create` before the first start.
 */
export interface ServeProcess {
  readonly base: string;
  readonly dataDir: string;
  readonly env: NodeJS.ProcessEnv;
  readonly token: string;
  /** The `ums serve` started last (it may have exited since). */
  readonly child: ChildProcess | undefined;
  running(): boolean;
  /** Starts `ums serve` (with `env` added for this start) and waits until it answers. */
  start(env?: NodeJS.ProcessEnv): Promise<ChildProcess>;
  /** What every start of `ums serve` wrote to its stderr (its log), the last 4 MiB. */
  log(): string;
  /** Sends `signal` to the running `ums serve` and waits for its exit. */
  stop(signal: NodeJS.Signals): Promise<void>;
  /** A request with the token; `body`, when given, is sent as JSON. */
  api(method: string, path: string, body?: unknown): Promise<Response>;
  /**
   * The test's end: when `ums serve` runs, deletes `units` through the API (so every host
   * resource of theirs goes) and stops it with SIGTERM; then `cleanup(dataDir)` removes what the
   * stopped server left on the host, the subnet is released and the data dir removed.
   */
  close(units: readonly string[], cleanup: (dataDir: string) => Promise<void>): Promise<void>;
}

export async function prepareServe(o: ServeProcessOpts): Promise<ServeProcess> {
  const dataDir = await mkdtemp(join(tmpdir(), `ums-${o.name}-`));
  let unlock: (() => Promise<void>) | undefined;
  let env: NodeJS.ProcessEnv;
  let token: string;
  let base: string;
  try {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const subnet = await lockSubnet();
    unlock = subnet.unlock;
    env = {
      ...(await testServeEnv(subnet.n)),
      PATH: process.env.PATH,
      UMS_DATA_DIR: dataDir,
      UMS_LISTEN: `127.0.0.1:${port}`,
      UMS_LOG_LEVEL: "warn",
      ...o.env,
    };
    token = execFileSync(UMS_BIN, ["token", "create", "--org", o.org], { env }).toString().trim();
  } catch (err) {
    await unlock?.();
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  let child: ChildProcess | undefined;
  let log = "";
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
  return {
    base,
    dataDir,
    env,
    token,
    get child() {
      return child;
    },
    running: () => isRunning(child),
    async start(more = {}) {
      child = await spawnServe(base, { ...env, ...more });
      child.stderr?.on("data", (d) => {
        log = (log + d).slice(-(4 << 20));
      });
      return child;
    },
    log: () => log,
    stop: (signal) => stopChild(child, signal),
    api,
    async close(units, cleanup) {
      if (isRunning(child)) {
        for (const unit of units) await api("DELETE", `/v1/units/${unit}`).catch(() => {});
        await stopChild(child, "SIGTERM");
      }
      await cleanup(dataDir);
      await unlock?.();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
