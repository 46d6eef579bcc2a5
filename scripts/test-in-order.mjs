// Runs the test files given as arguments with node's test runner, two at a time, in the order
// given (run-tests.mjs puts the slowest first). `node --test FILES` sorts its files by name, so the
// order is kept by calling the runner's `run()` instead; the spec reporter and the exit code (1 on
// any failure) are those of `node --test`.
import { run } from "node:test";
import { spec } from "node:test/reporters";

const files = process.argv.slice(2);
const stream = run({ files, concurrency: 2, timeout: 600_000 });
stream.on("test:fail", () => {
  process.exitCode = 1;
});
stream.compose(spec).pipe(process.stdout);
