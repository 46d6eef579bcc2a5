// Bundles the CLI's compiled code (dist/main.js with the SDK, the protocol and commander) into
// dist/bundle/, so that `ums exec` starts from a few files instead of a hundred (issue #13's
// start-up goal: node resolves and reads each module file, and on a cold start that is most of the
// time). The host-admin part (@ums/server), the MCP and other lazily loaded libraries stay
// external: they load from node_modules only when a command needs them. bin/ums runs the bundle
// when it is newer than the compiled code it came from, and dist/main.js otherwise.
// Usage: node packages/cli/build.mjs   (after `npx tsc -b`)
import { mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
// The same depth below packages/cli as dist/commands/, so that paths resolved from a module's own
// URL (install.ts finds bin/ums that way) are the same in the bundle.
const outdir = join(here, "dist", "bundle");

const tmp = `${outdir}.${process.pid}.tmp`;
rmSync(tmp, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });
const result = await esbuild.build({
  metafile: true,
  entryPoints: [join(here, "dist", "main.js")],
  outdir: tmp,
  bundle: true,
  splitting: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external: [
    "@ums/server",
    "@ums/server/*",
    // @ums/mcp is bundled (a lazy chunk): it must share the bundle's @ums/sdk, whose errors it
    // recognises by class; its own libraries load from node_modules.
    "@modelcontextprotocol/sdk",
    "@modelcontextprotocol/sdk/*",
    "zod",
    "node-pty",
    "ws",
    "cli-table3",
    "cli-progress",
    "bufferutil",
    "utf-8-validate",
  ],
  // commander is CommonJS: give the ESM bundle a require() for its node: built-ins.
  banner: {
    js: "import { createRequire as __umsCreateRequire } from 'node:module'; const require = __umsCreateRequire(import.meta.url);",
  },
  legalComments: "none",
  logLevel: "warning",
});
// The entry bin/ums runs: the bundle, unless a compiled file it was made of changed since (a
// `tsc -b` without this script): then the compiled code, so that what runs is never stale.
const root = resolve(here, "..", "..");
const inputs = Object.keys(result.metafile.inputs)
  .map((f) => resolve(root, f))
  .filter((f) => !f.includes("/node_modules/"));
const newest = Math.max(...inputs.map((f) => statSync(f).mtimeMs));
writeFileSync(
  join(tmp, "ums.mjs"),
  `// Made by packages/cli/build.mjs.
import { statSync } from "node:fs";
const inputs = ${JSON.stringify(inputs.map((f) => relative(outdir, f)))};
const newest = ${newest};
const stale = inputs.some((f) => {
  try {
    return statSync(new URL(f, import.meta.url)).mtimeMs > newest;
  } catch {
    return true;
  }
});
await import(stale ? "../main.js" : "./main.js");
`,
);
// `ums exec`'s own bundle, one file (issue #13: a short exec's time is mostly the CLI's start, and
// node pays for every module file and every byte it compiles): the fast path (src/exec-main.ts),
// with the same staleness rule, and the whole CLI (./main.js) for what the fast path leaves.
// Built twice: the first build names the inputs, which the second one's entry checks.
const execEntry = (list, newestInput) => `// Made by packages/cli/build.mjs.
import { statSync } from "node:fs";
import { execMain } from ${JSON.stringify(join(here, "dist", "exec-main.js"))};
const inputs = ${JSON.stringify(list)};
const stale = inputs.some((f) => {
  try {
    return statSync(new URL(f, import.meta.url)).mtimeMs > ${newestInput};
  } catch {
    return true;
  }
});
// Not bundled (a computed specifier): the split bundle's main, or the compiled code when stale.
const main = new URL(stale ? "../main.js" : "./main.js", import.meta.url).href;
if (stale) await import(main);
else await execMain(() => import(main));
`;
const execOptions = (entry) => ({
  metafile: true,
  stdin: { contents: entry, resolveDir: here, sourcefile: "exec-entry.js" },
  outfile: join(tmp, "exec.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external: ["ws", "bufferutil", "utf-8-validate"],
  banner: {
    js: "import { createRequire as __umsCreateRequire } from 'node:module'; const require = __umsCreateRequire(import.meta.url);",
  },
  legalComments: "none",
  logLevel: "warning",
});
const first = await esbuild.build(execOptions(execEntry([], 0)));
const execInputs = Object.keys(first.metafile.inputs)
  .filter((f) => !f.endsWith("exec-entry.js") && !f.includes("node_modules/"))
  .map((f) => resolve(root, f));
await esbuild.build(
  execOptions(
    execEntry(
      execInputs.map((f) => relative(outdir, f)),
      Math.max(...execInputs.map((f) => statSync(f).mtimeMs)),
    ),
  ),
);
// Replaced whole: a launcher never sees half of a new bundle beside half of the old one.
rmSync(outdir, { recursive: true, force: true });
renameSync(tmp, outdir);
