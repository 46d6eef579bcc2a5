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
// The slowest files first (seconds each took in a clean-clone run, session 19): two run at a time,
// and a long file started last would run alone at the end while the other slot sits idle. Session 55
// measured today's times (.tmp/test-times.json) and ordered by them: no faster (901-942 s), and the
// CLI's tests then twice met an exec whose agent connection was aborted (not seen in six runs of
// this order), so this order stays until that is understood.
const SLOW_SECONDS = {
  "server/dist/soak/soak.test.js": 185,
  "server/dist/lifecycle/crash.test.js": 164,
  "server/dist/soak/chaos.test.js": 125,
  "server/dist/node/remote/processes.test.js": 120,
  "server/dist/api/units/pagination.api.test.js": 100,
  "server/dist/node/remote/cluster.test.js": 92,
  "server/dist/api/fuzz.test.js": 72,
  "server/dist/api/images/upgrade-crash.test.js": 57,
  "server/dist/events/events.test.js": 50,
  "server/dist/errors/pool-full.test.js": 48,
  "server/dist/api/checkpoints/replication.test.js": 46,
  "server/dist/security/fair-share.test.js": 45,
  "server/dist/replication/replication.test.js": 42,
  "server/dist/security/fs-escape-generated.test.js": 41,
  "server/dist/security/disk-quota.test.js": 37,
  "server/dist/security/stuck-agent.test.js": 37,
  "server/dist/api/checkpoints/retention.test.js": 35,
  "server/dist/api/checkpoints/receive-crash.test.js": 33,
  "server/dist/node/remote/lost-node.test.js": 29,
  "server/dist/api/templates/template-crash.test.js": 27,
  "cli/dist/commands/node.test.js": 27,
  "server/dist/api/services/shapes.test.js": 27,
  "server/dist/api/console/browser.test.js": 25,
};
const slowness = (f) => SLOW_SECONDS[relative(join(root, "packages"), f)] ?? 0;
const selected = files
  .filter((f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s)))
  .sort((a, b) => slowness(b) - slowness(a) || (a < b ? -1 : a > b ? 1 : 0));
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
// `imported/.uploads` is no image: the pool's place for imports' archives, made by the first import
// on a pool and kept (runtime/runc/imported-images.ts uploadDir).
const KEPT = new Set([".uploads"]);
const listIn = (dir) => {
  try {
    return poolDir ? readdirSync(join(poolDir, "pool", dir)).filter((e) => !KEPT.has(e)) : [];
  } catch {
    return [];
  }
};
const poolBefore = new Set(listPool());
const ownBefore = Object.fromEntries(Object.keys(OWN_SUBVOLUMES).map((d) => [d, new Set(listIn(d))]));
// The suite's own connections are all loopback HTTP (the one exception, npm's install of the Sprites
// JS client into the test cache, uses npm's own CA settings), so the
// extra CAs for the outside world do nothing for it but cost: node 20 parses NODE_EXTRA_CA_CERTS at
// every start, ~80 ms for a system bundle on this machine kind, and the suite starts many
// node processes (servers, the CLI, helpers): the CLI's tests took 137 s with it, 117 s without.
const { NODE_EXTRA_CA_CERTS: _extraCa, ...testEnv } = process.env;
const child = spawn(process.execPath, [join(root, "scripts", "test-in-order.mjs"), ...selected], {
  stdio: "inherit",
  cwd: root,
  env: testEnv,
});
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
