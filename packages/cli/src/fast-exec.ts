// Runs a `ums exec` that fast-exec-args.ts read, with no more than it needs: the config file, the
// SDK's HTTP exec and the error report. Ends as the whole command line does: once what it printed
// has left, with the remote exit code, or with its one-line error.

import { runExec } from "./commands/exec-run.js";
import { exitWhenFlushed } from "./exit.js";
import type { FastExec } from "./fast-exec-args.js";
import { reportAndExit } from "./report.js";
import { connectWith, unitName } from "./user/connect.js";
import { positiveMs } from "./user/input.js";

export async function runFastExec(f: FastExec): Promise<never> {
  try {
    const timeoutMs = f.timeout === undefined ? undefined : positiveMs("--timeout")(f.timeout);
    const r = await connectWith(f.context);
    await runExec(r, {
      unit: unitName(f.name, r),
      command: f.command,
      env: f.env,
      cwd: f.cwd,
      root: f.root,
      timeoutMs,
    });
  } catch (err) {
    return reportAndExit(err);
  }
  return exitWhenFlushed();
}
