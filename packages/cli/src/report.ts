// How a command's failure is reported: one line on stderr, then the exit code (2 for a usage error,
// 1 otherwise), once stdout and stderr have flushed. Without commander (the fast path uses it).

import { UmsError } from "@ums/sdk";
import { UsageError } from "./errors.js";
import { exitWhenFlushed } from "./exit.js";

export function reportAndExit(err: unknown, isUsage: (err: unknown) => boolean = () => false): Promise<never> {
  if (err instanceof UsageError || isUsage(err)) {
    process.stderr.write(`ums: ${(err as Error).message}\n`);
    return exitWhenFlushed(2);
  }
  // The server's (or the SDK's) stable code first, then what it said: one line.
  if (err instanceof UmsError) {
    process.stderr.write(`ums: ${err.code}: ${err.message.replace(/\s*\n\s*/g, " ")}\n`);
    return exitWhenFlushed(1);
  }
  process.stderr.write(`ums: ${err instanceof Error ? err.message : String(err)}\n`);
  return exitWhenFlushed(1);
}
