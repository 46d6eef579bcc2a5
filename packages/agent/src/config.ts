import { dirname } from "node:path";
import { parseDuration } from "@ums/protocol/duration";

// The agent is configured by environment variables only; every one has a default that is right inside a
// unit (docs/ARCHITECTURE.md section 1: the agent runs beside PID 1 in every unit and serves the host on a socket).

export interface AgentConfig {
  /**
   * Where the agent serves HTTP + websocket for the host: an inherited listening descriptor the host
   * made (UMS_AGENT_LISTEN_FD, how units run: the host owns the socket's path, outside the unit), or a
   * Unix socket path the agent binds itself (UMS_AGENT_SOCKET, for tests and tools).
   */
  listen: { fd: number } | { path: string };
  /** A directory of the agent's own for its private sockets (UMS_AGENT_RUN_DIR). */
  runDir: string;
  /** The default user of exec sessions (UMS_AGENT_UID/GID/HOME/USER). */
  user: { uid: number; gid: number; home: string; name: string };
  /**
   * Issue #18: what a unit made from an organization image starts commands with: the image's `Env`
   * (UMS_AGENT_ENV, a JSON array of `NAME=value`) and `WorkingDir` (UMS_AGENT_WORKDIR; null: HOME).
   */
  image: { env: [string, string][]; workdir: string | null };
  /** The unit's public URL, used as `address` in port notifications (UMS_UNIT_URL); null → http://localhost:N. */
  unitUrl: string | null;
  /** Keepalive text frame interval on exec websockets (UMS_AGENT_PING_INTERVAL, default 20s). */
  pingIntervalMs: number;
  /** Grace between SIGHUP and SIGKILL when a session is ended for lack of clients (UMS_AGENT_KILL_GRACE, 5s). */
  killGraceMs: number;
  /** Poll interval of the listening-port watcher (UMS_AGENT_PORT_POLL, 500ms). */
  portPollMs: number;
  /** Output kept per session for re-attach (UMS_AGENT_RING_BYTES, 256 KiB). */
  ringBytes: number;
  /**
   * Most sessions that may outlive their websocket (TTY, detachable, max_run_after_disconnect > 0)
   * the unit holds at once, live or exited and kept for a re-attach (UMS_AGENT_MAX_DETACHABLE, 32).
   */
  maxDetachable: number;
  /**
   * How exec sessions start their processes (UMS_AGENT_SPAWNER): "native" through ums-spawn when
   * the agent has it beside its entry point (exec/native-spawner.ts), else node's spawn; "node"
   * always node's spawn.
   */
  spawner: "native" | "node";
}

export const DEFAULT_SOCKET = "/run/ums/agent.sock";

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const fd = nonEmpty(env.UMS_AGENT_LISTEN_FD) === undefined ? undefined : intVar(env, "UMS_AGENT_LISTEN_FD", 3);
  const socketPath = nonEmpty(env.UMS_AGENT_SOCKET) ?? DEFAULT_SOCKET;
  return {
    listen: fd !== undefined ? { fd } : { path: socketPath },
    runDir: nonEmpty(env.UMS_AGENT_RUN_DIR) ?? (fd !== undefined ? "/run/ums" : dirname(socketPath)),
    user: {
      uid: intVar(env, "UMS_AGENT_UID", 1000),
      gid: intVar(env, "UMS_AGENT_GID", 1000),
      home: nonEmpty(env.UMS_AGENT_HOME) ?? "/home/unit",
      name: nonEmpty(env.UMS_AGENT_USER) ?? "unit",
    },
    image: { env: imageEnv(env.UMS_AGENT_ENV), workdir: nonEmpty(env.UMS_AGENT_WORKDIR) ?? null },
    unitUrl: nonEmpty(env.UMS_UNIT_URL) ?? null,
    pingIntervalMs: durationVar(env, "UMS_AGENT_PING_INTERVAL", 20_000),
    killGraceMs: durationVar(env, "UMS_AGENT_KILL_GRACE", 5_000),
    portPollMs: durationVar(env, "UMS_AGENT_PORT_POLL", 500),
    ringBytes: intVar(env, "UMS_AGENT_RING_BYTES", 256 * 1024),
    maxDetachable: intVar(env, "UMS_AGENT_MAX_DETACHABLE", 32),
    spawner: spawnerVar(env.UMS_AGENT_SPAWNER),
  };
}

function imageEnv(v: string | undefined): [string, string][] {
  if (nonEmpty(v) === undefined) return [];
  let list: unknown;
  try {
    list = JSON.parse(v as string);
  } catch {
    throw new ConfigError("UMS_AGENT_ENV must be a JSON array of NAME=value strings");
  }
  if (!Array.isArray(list)) throw new ConfigError("UMS_AGENT_ENV must be a JSON array of NAME=value strings");
  return list.flatMap((e) => {
    const i = typeof e === "string" ? e.indexOf("=") : -1;
    return i > 0 ? [[e.slice(0, i), e.slice(i + 1)] as [string, string]] : [];
  });
}

function spawnerVar(v: string | undefined): "native" | "node" {
  if (v === undefined || v === "" || v === "native") return "native";
  if (v === "node") return "node";
  throw new ConfigError(`UMS_AGENT_SPAWNER must be native or node, got ${JSON.stringify(v)}`);
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}

function intVar(env: NodeJS.ProcessEnv, name: string, dflt: number): number {
  const v = nonEmpty(env[name]);
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v)) throw new ConfigError(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return Number(v);
}

function durationVar(env: NodeJS.ProcessEnv, name: string, dflt: number): number {
  const v = nonEmpty(env[name]);
  if (v === undefined) return dflt;
  const ms = parseDuration(v);
  if (ms === null || ms <= 0) throw new ConfigError(`${name} must be a positive duration (e.g. 20s), got ${v}`);
  return ms;
}
