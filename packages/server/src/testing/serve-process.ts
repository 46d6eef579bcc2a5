import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { TEST_NETWORK_ENV } from "./runtime.js";

/** The launcher a user runs (`bin/ums` at the repository's root). */
export const UMS_BIN = resolve(fileURLToPath(import.meta.url), "../../../../../bin/ums");

/**
 * Spawns `ums serve` with `env` (which must name where it listens, UMS_LISTEN) and resolves once
 * GET `<base>/healthz` answers; fails with the server's log if it exits or takes over 30 s. Its
 * units reach only the test network (TEST_NETWORK_ENV) unless `env` says otherwise.
 */
export async function spawnServe(base: string, env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn(UMS_BIN, ["serve"], {
    env: { ...TEST_NETWORK_ENV, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr?.on("data", (d) => {
    log += d;
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return child;
    } catch {}
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`ums serve did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** True while the process has neither exited nor been killed by a signal. */
export function isRunning(child: ChildProcess | undefined): child is ChildProcess {
  return !!child && child.exitCode === null && child.signalCode === null;
}
