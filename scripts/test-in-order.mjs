// Runs the test files given as arguments with node's test runner, two at a time, in the order
// given (run-tests.mjs puts the slowest first). `node --test FILES` sorts its files by name, so the
// order is kept by calling the runner's `run()` instead; the spec reporter and the exit code (1 on
// any failure) are those of `node --test`.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { run } from "node:test";
import { spec } from "node:test/reporters";

const files = process.argv.slice(2);
// forceExit: a file whose tests have all ended exits even if something it started still holds its
// event loop (a cleanup that failed and left a child process or a socket open). Without it such a
// file never ends, and the run hangs until CI's time limit, with no summary; with it the failure is
// reported, and what leaked shows in run-tests.mjs's pool check and on the host.
// UMS_TEST_CONCURRENCY: files at once (default 2, what CI runs; for trying other settings).
const concurrency = Number(process.env.UMS_TEST_CONCURRENCY) || 2;
const stream = run({ files, concurrency, timeout: 600_000, forceExit: true });
stream.on("test:fail", () => {
  process.exitCode = 1;
});
stream.compose(spec).pipe(process.stdout);

// Each file's wall time against the time of its top-level tests and suites (a suite's includes its
// hooks), in `.tmp/test-times.json` (slowest first): a file whose wall time far exceeds that spends
// it outside them (a top-level hook that waits, something that holds the process after its tests, a
// slow import), which the runner's own output does not show. run-tests.mjs's SLOW_SECONDS
// (the order files start in) can be updated from it.
const root = new URL("..", import.meta.url).pathname; // as run-tests.mjs
const times = new Map();
const timesOf = (file) => {
  const name = relative(join(root, "packages"), file);
  if (!times.has(name)) times.set(name, { file: name, wallS: 0, testsS: 0 });
  return times.get(name);
};
stream.on("test:complete", (e) => {
  if (e.nesting !== 0 || !e.file) return;
  const seconds = (e.details?.duration_ms ?? 0) / 1000;
  if (resolve(e.name) === e.file) timesOf(e.file).wallS = seconds;
  else timesOf(e.file).testsS += seconds;
});
stream.on("end", () => {
  const rows = [...times.values()]
    .map((t) => ({ ...t, wallS: +t.wallS.toFixed(1), testsS: +t.testsS.toFixed(1) }))
    .sort((a, b) => b.wallS - a.wallS);
  try {
    mkdirSync(join(root, ".tmp"), { recursive: true });
    writeFileSync(join(root, ".tmp", "test-times.json"), `${JSON.stringify(rows, null, 1)}\n`);
  } catch {} // the times are a help, not a result: a read-only checkout runs without them
});
