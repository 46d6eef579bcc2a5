import { mkdirSync, unlinkSync } from "node:fs";
import { ConfigError, loadConfig } from "./config.js";
import { startNativeSpawner, stopNativeSpawner } from "./exec/native-spawner.js";
import { runFsWorker } from "./fs/worker.js";
import { writeIdentity } from "./identity.js";
import { startInternalApi } from "./internal/api-socket.js";
import { createAgent, listen } from "./server.js";
import { openSupervisor } from "./services/boot.js";
import type { Supervisor } from "./services/supervisor.js";
import { startGate } from "./start-gate.js";
import { log } from "./util/log.js";
import { AGENT_VERSION } from "./version.js";

// Entry point of the unit agent (docs/ARCHITECTURE.md section 1): runs inside every unit as the child of PID 1
// (catatonit), serves the host on a Unix socket, and owns the unit's exec sessions.

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      log(`invalid configuration: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }

  // Sessions started on a PTY inherit the agent's supplementary groups (node-pty does not reset them), so
  // a root agent drops its own: no session may keep root's groups after switching to the unit user.
  if (process.getuid?.() === 0 && process.setgroups) {
    try {
      process.setgroups([]);
    } catch (err) {
      log("could not drop supplementary groups", { error: (err as Error).message });
    }
  }

  // Services are the unit's (their state is on its filesystem): only inside a unit, where the host
  // sets UMS_INTERNAL_API_SOCKET.
  const internalSocket = process.env.UMS_INTERNAL_API_SOCKET;
  let services: Supervisor | undefined;
  if (internalSocket) {
    try {
      services = openSupervisor(config);
    } catch (err) {
      log("services unavailable", { error: (err as Error).message });
    }
  }
  mkdirSync(config.runDir, { recursive: true, mode: 0o755 });
  // Inside a unit: /etc/hostname and /etc/hosts name it. Written here, as the unit's root and inside
  // its own view, never by the host into the rootfs (docs/SECURITY.md, "The boundary rule").
  if (internalSocket && process.env.UMS_UNIT_NAME) {
    try {
      writeIdentity(process.env.UMS_UNIT_NAME);
    } catch (err) {
      log("could not write /etc/hostname and /etc/hosts", { error: (err as Error).message });
    }
  }
  const agent = createAgent(config, services);
  await listen(agent.server, config.listen);
  log("agent listening", { ...config.listen, pid: process.pid, version: AGENT_VERSION });
  if (internalSocket) {
    await startInternalApi(internalSocket, process.env.UMS_HOST_SOCKET ?? "/.unit/run/host.sock", services);
    log("internal API listening", { socket: internalSocket });
  }
  // Every boot starts the services again, in `needs` order (docs/ARCHITECTURE.md section 5), once
  // the host has finished the unit's set-up (its link and disk limit: start-gate.ts). The agent
  // answers the host meanwhile.
  startGate(process.env.UMS_AGENT_GATE_FD)
    .then(() => services?.boot())
    .catch((err) => log("could not start the services", { error: (err as Error).message }));
  process.stdout.write(`${JSON.stringify({ ready: true, ...config.listen, pid: process.pid })}\n`);
  // ums-spawn (exec/native-spawner.ts) starts a second after: its start is a fork of this node, which
  // held up a boot's first answers (cold → first exec +5-10 ms); node's spawn serves execs meanwhile.
  startNativeSpawner(process.argv[1] ?? "", config, log, 1000);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log("agent stopping", { signal });
    void agent.close();
    stopNativeSpawner();
    if ("path" in config.listen) {
      try {
        unlinkSync(config.listen.path);
      } catch {
        // already gone
      }
    }
    setTimeout(() => process.exit(0), 200).unref();
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGHUP", () => {});
  // One bad request or session must not take every session of the unit down with the agent.
  process.on("uncaughtException", (err) => log("uncaught exception", { error: err.stack ?? String(err) }));
  process.on("unhandledRejection", (err) => log("unhandled rejection", { error: String(err) }));
}

// `--fs-worker`: the filesystem worker of the unit user, started by the agent itself (fs/worker.ts).
if (process.argv[2] === "--fs-worker") runFsWorker();
else
  main().catch((err) => {
    log("agent failed to start", { error: (err as Error).stack ?? String(err) });
    process.exit(1);
  });
