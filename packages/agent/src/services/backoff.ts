// Restart backoff of crashed services (docs/ARCHITECTURE.md section 5): 1 s, doubling to a 30 s cap; a service
// that ran healthily for a while starts over at 1 s.

export const BACKOFF_FIRST_MS = 1000;
export const BACKOFF_CAP_MS = 30_000;
/** A run at least this long counts as healthy: the next crash waits BACKOFF_FIRST_MS again. */
export const HEALTHY_RUN_MS = 10_000;

/** The wait before restart number `attempt` (1 = the first restart after a crash). */
export function backoffMs(attempt: number): number {
  if (attempt <= 1) return BACKOFF_FIRST_MS;
  return Math.min(BACKOFF_CAP_MS, BACKOFF_FIRST_MS * 2 ** Math.min(attempt - 1, 20));
}

/** The attempt number after a crash, given the previous one and how long the process ran. */
export function nextAttempt(previous: number, ranMs: number): number {
  return ranMs >= HEALTHY_RUN_MS ? 1 : previous + 1;
}
