// Bundles the agent into one file, dist/agent.mjs, for the host to bind-mount into every unit.
// node-pty stays external (native addon, mounted beside the bundle at node_modules/node-pty).
// Usage: node packages/agent/build.mjs   (exported build() is used by the tests)
import { readFileSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
export const outfile = join(here, "dist", "agent.mjs");

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
  });
  renameSync(tmp, outfile); // atomic: concurrent builds never leave a half-written bundle
  return outfile;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await build();
  console.log(`built ${outfile}`);
}
