// Bundles the agent into one file, dist/agent.mjs, for the host to bind-mount into every unit.
// node-pty stays external (native addon, mounted beside the bundle at node_modules/node-pty).
// Also builds dist/libums-statfs.so (src/native/statfs-quota.c: `df` in a unit shows its disk) and
// the ld.so.preload naming it, which the host binds over the unit's /etc/ld.so.preload.
// Usage: node packages/agent/build.mjs   (exported build() is used by the tests)
import { execFileSync } from "node:child_process";
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
export const outfile = join(here, "dist", "agent.mjs");
export const statfsLib = join(here, "dist", "libums-statfs.so");
/** Where the unit finds the library: the agent's dist directory is bound at /.unit/agent. */
const statfsLibInUnit = "/.unit/agent/libums-statfs.so";

/**
 * The statfs library, with the host's C compiler (the one npm's native builds use). Without a
 * compiler there is none, and units show the pool's size in `df` (a warning says so).
 */
export function buildStatfsLib() {
  const tmp = `${statfsLib}.${process.pid}.tmp`;
  const src = join(here, "src", "native", "statfs-quota.c");
  try {
    execFileSync(process.env.CC || "cc", ["-O2", "-fPIC", "-shared", "-Wall", "-Werror", "-o", tmp, src], {
      stdio: ["ignore", "inherit", "inherit"],
    });
  } catch (err) {
    rmSync(tmp, { force: true });
    rmSync(statfsLib, { force: true });
    rmSync(join(here, "dist", "ld.so.preload"), { force: true });
    console.warn(`warning: ${src} not built (${err.message}); df in units will show the pool's size`);
    return undefined;
  }
  renameSync(tmp, statfsLib);
  // Renamed in, never rewritten in place: running units have this file bound at /etc/ld.so.preload.
  const preload = join(here, "dist", "ld.so.preload");
  writeFileSync(`${preload}.${process.pid}.tmp`, `${statfsLibInUnit}\n`);
  renameSync(`${preload}.${process.pid}.tmp`, preload);
  return statfsLib;
}

/**
 * Node built-ins that ws requires when it is loaded but the agent never uses (it serves websockets
 * only, without permessage-deflate: no https or tls client, no zlib). Each is compiled at start-up
 * (node's snapshot lacks them: ~10 ms of every unit's boot), so the bundle gets a stand-in that
 * loads the real module at its first use instead: the same behaviour, paid only if ever needed.
 */
const LAZY_BUILTINS = ["https", "tls", "zlib"];

const lazyBuiltins = {
  name: "lazy-builtins",
  setup(b) {
    const filter = new RegExp(`^(node:)?(${LAZY_BUILTINS.join("|")})$`);
    b.onResolve({ filter }, (args) =>
      args.kind === "require-call" ? { path: args.path.replace(/^node:/, ""), namespace: "lazy-builtin" } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "lazy-builtin" }, (args) => ({
      loader: "js",
      contents: `let real;
const load = () => (real ??= require("node:${args.path}"));
module.exports = new Proxy({}, {
  get: (_, key) => load()[key],
  has: (_, key) => key in load(),
  ownKeys: () => Reflect.ownKeys(load()),
  getOwnPropertyDescriptor: (_, key) => {
    const d = Reflect.getOwnPropertyDescriptor(load(), key);
    return d && { ...d, configurable: true };
  },
});`,
    }));
  },
};

export async function build() {
  const pkg = JSON.parse(readFileSync(join(here, "package.json"), "utf8"));
  const tmp = `${outfile}.${process.pid}.tmp`;
  await esbuild.build({
    entryPoints: [join(here, "src", "main.ts")],
    outfile: tmp,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: ["node-pty", "bufferutil", "utf-8-validate"],
    define: { __AGENT_VERSION__: JSON.stringify(pkg.version) },
    // ws is CommonJS: give the ESM bundle a require() for its node: built-ins.
    banner: {
      js: "import { createRequire as __umsCreateRequire } from 'node:module'; const require = __umsCreateRequire(import.meta.url);",
    },
    legalComments: "none",
    logLevel: "warning",
    plugins: [lazyBuiltins],
  });
  renameSync(tmp, outfile); // atomic: concurrent builds never leave a half-written bundle
  buildStatfsLib();
  return outfile;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await build();
  console.log(`built ${outfile}`);
}
