/**
 * Crash injection (issue #5, "crash safety"): named points in multi-step operations where a test
 * can make `ums serve` die by SIGKILL, exactly as a `kill -9` at that moment would. Armed only by
 * the environment variable `UMS_FAILPOINTS` (a comma-separated list of names), read once at start;
 * unset, every call is a no-op.
 */
const armed: ReadonlySet<string> = new Set(
  (process.env.UMS_FAILPOINTS ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
);

/** The points placed in the product, so a test can loop over all of them. */
export const FAILPOINTS = Object.freeze([
  "checkpoint.frozen",
  "checkpoint.snapshotted",
  "checkpoint.recorded",
  "restore.backed-up",
  "restore.stopped",
  "restore.journaled",
  "restore.old-moved",
  "restore.new-snapshotted",
  "restore.new-moved",
  "restore.swapped",
  "restore.recorded",
  "delete.row-deleted",
  "delete.hidden",
  "unit-delete.tombstoned",
  "unit-delete.destroyed",
  "unit-delete.dropped",
  "template.recorded",
  "template.snapshotted",
  "template.hidden",
  "template.files-deleted",
  "upgrade.checked",
  "upgrade.new-made",
  "upgrade.new-moved",
  "upgrade.swapped",
  "receive.midway",
] as const);

export type Failpoint = (typeof FAILPOINTS)[number];

export function failpoint(name: Failpoint): void {
  if (armed.size > 0 && armed.has(name)) process.kill(process.pid, "SIGKILL");
}
