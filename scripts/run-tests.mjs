// Runs every compiled test file (packages/*/dist/**/*.test.js) with node's test runner.
// Arguments filter test files by substring, e.g. `node scripts/run-tests.mjs pagination`.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const filters = process.argv.slice(2);

function* walk(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* walk(p);
    else if (e.name.endsWith(".test.js")) yield p;
  }
}

const files = [];
for (const pkg of readdirSync(join(root, "packages"))) {
  const dist = join(root, "packages", pkg, "dist");
  try {
    for (const f of walk(dist)) files.push(f);
  } catch {}
}
const selected = files.filter((f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s))).sort();
if (selected.length === 0) {
  console.error("no test files matched; did the build run?");
  process.exit(1);
}
const child = spawn(
  process.execPath,
  ["--test", "--test-reporter=spec", "--test-concurrency=2", "--test-timeout=600000", ...selected],
  { stdio: "inherit", cwd: root },
);
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
