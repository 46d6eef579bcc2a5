// Runs the test files given as arguments with node's test runner, two at a time, in the order
// given (run-tests.mjs puts the slowest first). `node --test FILES` sorts its files by name, so the
// order is kept by calling the runner's `run()` instead; the spec reporter and the exit code (1 on
// any failure) are those of `node --test`.
import { run } from "node:test";
import { spec } from "node:test/reporters";

const files = process.argv.slice(2);
// forceExit: a file whose tests have all ended exits even if something it started still holds its
// event loop (a cleanup that failed and left a child process or a socket open). Without it such a
// file never ends, and the run hangs until CI's time limit, with no summary; with it the failure is
// reported, and what leaked shows in run-tests.mjs's pool check and on the host.
const stream = run({ files, concurrency: 2, timeout: 600_000, forceExit: true });
stream.on("test:fail", () => {
  process.exitCode = 1;
});
stream.compose(spec).pipe(process.stdout);
