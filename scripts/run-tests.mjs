// Runs every compiled test file (packages/*/dist/**/*.test.js) with node's test runner.
// Arguments filter test files by substring, e.g. `node scripts/run-tests.mjs pagination`.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
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

// A compiled test whose source is gone (moved or deleted since an earlier build: tsc leaves its
// output behind) is not run: it would test code that is no longer there.
function layout(pkg) {
  try {
    const { compilerOptions: o = {} } = JSON.parse(readFileSync(join(root, "packages", pkg, "tsconfig.json"), "utf8"));
    return { src: o.rootDir ?? "src", out: o.outDir ?? "dist" };
  } catch {
    return { src: "src", out: "dist" };
  }
}
function hasSource(pkg, file) {
  const { src, out } = layout(pkg);
  const rel = relative(join(root, "packages", pkg, out), file);
  return !rel.startsWith("..") && existsSync(join(root, "packages", pkg, src, rel).replace(/\.js$/, ".ts"));
}
const files = [];
for (const pkg of readdirSync(join(root, "packages"))) {
  const dist = join(root, "packages", pkg, "dist");
  try {
    for (const f of walk(dist)) if (hasSource(pkg, f)) files.push(f);
  } catch {}
}
const selected = files.filter((f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s))).sort();
if (selected.length === 0) {
  console.error("no test files matched; did the build run?");
  process.exit(1);
}
// Unit disks in the shared test pool that outlive the run were leaked by a test (a server that
// made a disk no row knew of): named at the end, with when each was made, to find the test.
const { testPoolDir } = await import("../packages/server/dist/runtime/image/test-image.js").catch(() => ({
  testPoolDir: () => undefined, // the server is not built: no test of this run makes units
}));
const poolDir = testPoolDir();
const poolUnits = poolDir && join(poolDir, "pool", "units");
const listPool = () => {
  if (!poolUnits) return [];
  try {
    return readdirSync(poolUnits);
  } catch {
    return [];
  }
};
// Templates and organization images (issue #18) are subvolumes of their own in the pool.
const OWN_SUBVOLUMES = { templates: "a template", imported: "an image" };
const listIn = (dir) => {
  try {
    return poolDir ? readdirSync(join(poolDir, "pool", dir)) : [];
  } catch {
    return [];
  }
};
const poolBefore = new Set(listPool());
const ownBefore = Object.fromEntries(Object.keys(OWN_SUBVOLUMES).map((d) => [d, new Set(listIn(d))]));
const child = spawn(
  process.execPath,
  ["--test", "--test-reporter=spec", "--test-concurrency=2", "--test-timeout=600000", ...selected],
  { stdio: "inherit", cwd: root },
);
child.on("exit", (code, signal) => {
  const leaked = listPool().filter((e) => !poolBefore.has(e));
  for (const e of leaked) {
    let made = "";
    try {
      made = statSync(join(poolUnits, e)).birthtime.toISOString();
    } catch {}
    console.error(`a test left a unit disk in the shared pool: ${join(poolUnits, e)} (made ${made})`);
  }
  for (const [dir, what] of Object.entries(OWN_SUBVOLUMES)) {
    for (const e of listIn(dir).filter((t) => !ownBefore[dir].has(t))) {
      console.error(`a test left ${what} in the shared pool: ${join(poolDir, "pool", dir, e)}`);
    }
  }
  process.exit(code ?? (signal ? 1 : 0));
});
