import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";

/**
 * A new directory of the agent's own in its run dir (mode 0700: no other user of the unit enters
 * it), for a socket of a helper process. The run dir is made again first: root in the unit may have
 * emptied /run since the agent started. Throws when it cannot be made.
 */
export function privateRunSubdir(runDir: string, prefix: string): string {
  mkdirSync(runDir, { recursive: true, mode: 0o755 });
  return mkdtempSync(join(runDir, prefix));
}
