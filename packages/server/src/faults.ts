import type { Logger } from "pino";

// The last resort of `ums serve` (issue #19 finding 6, issue #11): an error that no code handled (an
// 'error' event without a listener, a rejected promise nobody awaited) must not stop the server that
// every unit's API depends on. It is logged with its context and counted; the counts are for a
// metrics endpoint to read. Each such fault is still a bug: the code that let it through gets a handler.

export type FaultKind = "uncaughtException" | "unhandledRejection";

const counts: Record<FaultKind, number> = { uncaughtException: 0, unhandledRejection: 0 };

/** Faults that reached the last-resort handler since the process started, by kind. */
export function faultCounts(): Readonly<Record<FaultKind, number>> {
  return { ...counts };
}

/** Counts one fault; returns the new total of all kinds. */
export function countFault(kind: FaultKind): number {
  counts[kind]++;
  return counts.uncaughtException + counts.unhandledRejection;
}

/**
 * Installs the process's handlers of last resort: each fault is logged (message `last-resort`, at
 * error level, with the error, its kind and the running counts) and the process keeps serving.
 * Returns the function that removes them. Only the server's entry point installs them: a library
 * (or a test runner) keeps its own policy.
 */
export function installLastResort(log: Logger): () => void {
  const report = (kind: FaultKind, err: unknown, origin?: string) => {
    const total = countFault(kind);
    try {
      log.error(
        { err, kind, origin, faults: total, ...faultCounts() },
        `last-resort handler caught an ${kind === "uncaughtException" ? "uncaught exception" : "unhandled rejection"} (fault ${total} since start); ums keeps serving`,
      );
    } catch {
      // The logger itself failed: the count stays, the process stays.
    }
  };
  const onException = (err: Error, origin: string) => report("uncaughtException", err, origin);
  const onRejection = (reason: unknown) => report("unhandledRejection", reason);
  process.on("uncaughtException", onException);
  process.on("unhandledRejection", onRejection);
  return () => {
    process.off("uncaughtException", onException);
    process.off("unhandledRejection", onRejection);
  };
}
