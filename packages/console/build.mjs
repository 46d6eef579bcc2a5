// Builds the console into dist/: index.html and content-hashed files under assets/, each with
// .br and .gz siblings that the server sends when the browser accepts them. esbuild bundles and
// minifies in well under a second (Preact and xterm.js included), so `npm run build` stays fast.
// Usage: node packages/console/build.mjs [--watch is not offered: rebuild, it takes a moment]
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "dist");
const tmp = `${out}.${process.pid}.tmp`;
rmSync(tmp, { recursive: true, force: true });
mkdirSync(join(tmp, "assets"), { recursive: true });

const result = await esbuild.build({
  entryPoints: [join(here, "src", "main.tsx")],
  outdir: join(tmp, "assets"),
  entryNames: "[name]-[hash]",
  chunkNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  target: ["chrome110", "firefox115"],
  minify: true,
  jsx: "automatic",
  jsxImportSource: "preact",
  metafile: true,
  legalComments: "eof",
  logLevel: "warning",
});

// The entry's script and its style sheet, by their hashed names (a dynamic import is an entry point
// of its own to esbuild: the main one is found by its source).
let js = "";
let css = "";
// The chunks the entry imports statically: preloaded with it instead of found after it is parsed.
let preload = "";
for (const [file, meta] of Object.entries(result.metafile.outputs)) {
  if (meta.entryPoint?.endsWith("src/main.tsx")) {
    js = basename(file);
    css = meta.cssBundle ? basename(meta.cssBundle) : "";
    for (const imp of meta.imports)
      if (imp.kind === "import-statement")
        preload += `<link rel="modulepreload" href="assets/${basename(imp.path)}">\n`;
  }
}
if (!js || !css) throw new Error(`console build: entry outputs not found (js ${js}, css ${css})`);
// A small icon as a hashed file (a browser asks for /favicon.ico otherwise, a 404 in its console).
const icon = readFileSync(join(here, "src", "icon.svg"));
const iconName = `icon-${createHash("sha256").update(icon).digest("hex").slice(0, 8)}.svg`;
writeFileSync(join(tmp, "assets", iconName), icon);
const html = readFileSync(join(here, "src", "index.html"), "utf8")
  .replace("%JS%", `assets/${js}`)
  .replace("%CSS%", `assets/${css}`)
  .replace("%ICON%", `assets/${iconName}`)
  .replace("%PRELOAD%\n", preload);
writeFileSync(join(tmp, "index.html"), html);

// Compressed siblings of every text file (index.html included).
const files = [
  "index.html",
  join("assets", iconName),
  ...Object.keys(result.metafile.outputs).map((f) => join("assets", basename(f))),
];
for (const f of files) {
  const path = join(tmp, f);
  const raw = readFileSync(path);
  writeFileSync(`${path}.br`, brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
  writeFileSync(`${path}.gz`, gzipSync(raw, { level: 9 }));
}
rmSync(out, { recursive: true, force: true });
renameSync(tmp, out);
