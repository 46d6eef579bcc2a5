// The `ums exec` bundle's entry (build.mjs makes dist/bundle/exec.mjs of it; bin/ums runs it for a
// line that starts with `exec`): one file with the fast path and nothing else, so node reads and
// compiles the least it can. Any other line, or an exec the fast path leaves, goes to `fallback`:
// the whole command line.

import { runFastExec } from "./fast-exec.js";
import { parseFastExec } from "./fast-exec-args.js";

export async function execMain(fallback: () => Promise<unknown>): Promise<void> {
  const args = process.argv.slice(2);
  const fast = args[0] === "exec" ? parseFastExec(args.slice(1)) : undefined;
  if (fast) await runFastExec(fast);
  else await fallback();
}
