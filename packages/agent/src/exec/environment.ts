import { resolve } from "node:path";
import type { SessionUser } from "../util/users.js";
import type { ExecRequest } from "./request.js";
import type { SpawnSpec } from "./spawn.js";

// The environment of an exec session: a clean login-like environment for the session's user (never the
// agent's own variables), then the unit's image's Env (issue #18), then the request's `env` entries,
// which override it. `dir` defaults to the image's WorkingDir or HOME; a relative one starts there.

export const SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export function sessionEnv(user: SessionUser, tty: boolean, extra: [string, string][]): Record<string, string> {
  const env: Record<string, string> = {
    PATH: SESSION_PATH,
    HOME: user.home,
    USER: user.name,
    LOGNAME: user.name,
    SHELL: "/bin/bash",
  };
  if (tty) env.TERM = "xterm-256color";
  for (const [k, v] of user.image?.env ?? []) env[k] = v;
  for (const [k, v] of extra) env[k] = v;
  return env;
}

/** Where a session or service starts: `dir` relative to the image's WorkingDir, else HOME. */
export function sessionDir(user: SessionUser, dir: string | undefined): string {
  const base = user.image?.workdir ?? user.home;
  return dir === undefined ? base : resolve(base, dir);
}

export function spawnSpec(req: ExecRequest, user: SessionUser): SpawnSpec {
  return {
    file: req.path,
    argv: req.argv,
    env: sessionEnv(user, req.tty, req.env),
    cwd: sessionDir(user, req.dir ?? undefined),
    uid: user.uid,
    gid: user.gid,
    tty: req.tty,
    stdin: req.stdin,
    cols: req.cols,
    rows: req.rows,
  };
}
