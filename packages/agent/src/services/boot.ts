import { mkdirSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import type { AgentConfig } from "../config.js";
import { defaultUser } from "../util/users.js";
import { defaultPaths, Supervisor } from "./supervisor.js";

/**
 * The unit's supervisor, with its files on the unit's own filesystem under `root`/var/lib/ums (so
 * checkpoints carry the definitions), and /.unit/logs (a small tmpfs) pointing at the log directory.
 * Services run as the unit's default user.
 */
export function openSupervisor(config: AgentConfig, root = "/", unitDir = "/.unit"): Supervisor {
  const paths = defaultPaths(root);
  mkdirSync(paths.logDir, { recursive: true, mode: 0o755 });
  try {
    symlinkSync(dirname(paths.logDir), join(unitDir, "logs"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  return new Supervisor({ ...paths, user: defaultUser(config) });
}
