#!/usr/bin/env node
// Images and templates benchmark (issue #18). Starts its own `ums serve` on the shared test pool
// (bench/lib.mjs; uplinks and egress ranges `none`) and prints each figure with its ratio to a
// baseline measured in the same run:
//
//   1. template: a unit with --template-gb GiB of random data is checkpointed and published as a
//      template; then, alternating, --runs times each: create from the template until the first
//      exec (`true`) answers, against create from the base image until the first exec answers.
//      Goal: template p50 within 10 % of base p50.
//   2. import: a `docker save` archive of about --import-mib MiB (one layer of many small files
//      copied from --source plus the glibc loader and libstdc++ the import requires, one layer of a
//      few random files) is imported with `POST /v1/images?name=X`, against `tar -xf` of the same
//      layer tars, in order, into an empty subvolume on the same btrfs pool; --import-runs times
//      each, alternating, median. Goal: the import's rate >= 60 % of tar's.
//
//   node bench/images.mjs [--template-gb 1] [--runs 15] [--import-mib 200] [--import-runs 5]
//                         [--source /usr/share] [--only template|import] [--json]
//
// Progress goes to stderr, results to stdout. It only reports: slow figures print MISS. It exits
// non-zero when something is broken (server does not start, a request is refused, data missing).
// Everything it makes (units, template, images, temp files, subvolumes on the pool) is removed at
// the end, on error, on Ctrl-C / SIGTERM and at the time cap (UMS_BENCH_TIMEOUT_S, default 1800).
import { createHash, randomFillSync } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { lstat, open, readdir, rename, stat, writeFile } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { killChildren, percentile, run, startBenchServer } from "./lib.mjs";

const USAGE = `usage: node bench/images.mjs [options]

  --template-gb G     GiB of random data in the template's unit (default 1)
  --runs N            creates from the template and from the base image, each (default 15);
                      also the default of --import-runs
  --import-mib M      size of the image archive to import, MiB (default 200)
  --import-runs N     imports and tar -x runs, each (default 5, or --runs when given)
  --source DIR        directory tree the small-files layer copies from (default /usr/share)
  --only PART         run only one part: template or import
  --layers-reversed   the archive's layer files come last first (the manifest keeps their order):
                      what an import costs when the server's guess of their order is wrong
  --json              also print one JSON object with all figures (last line of stdout)
  --help              this text

env: UMS_BENCH_TIMEOUT_S (default 1800) caps the whole run.`;

// ---------- flags ----------

const flags = parseFlags(process.argv.slice(2));
const TEMPLATE_GB = num("template-gb", 1);
const TEMPLATE_RUNS = int("runs", 15);
const IMPORT_MIB = num("import-mib", 200);
const IMPORT_RUNS = int("import-runs", flags.runs !== undefined ? TEMPLATE_RUNS : 5);
const SOURCE = flags.source ?? "/usr/share";
const ONLY = flags.only;
const JSON_OUT = flags.json === true;
const REVERSED = flags.reversed === true;
if (ONLY !== undefined && ONLY !== "template" && ONLY !== "import") usage(`--only: template or import, not '${ONLY}'`);
if (!SOURCE.startsWith("/") || !existsSync(SOURCE)) usage(`--source: '${SOURCE}' is not an existing absolute path`);
const RUN_TIMEOUT_MS = Number(process.env.UMS_BENCH_TIMEOUT_S || 1800) * 1000;
const TEMPLATE_MIB = Math.max(1, Math.round(TEMPLATE_GB * 1024));
// Of the archive: the small-files layer (with the base files), the rest in BIG_FILES random files.
const SMALL_SHARE = 0.75;
const BIG_FILES = 4;
const TEMPLATE_GOAL = 1.1; // template p50 / base p50 at most
const IMPORT_GOAL = 0.6; // import rate / tar rate at least

function parseFlags(argv) {
  const known = new Set(["template-gb", "runs", "import-mib", "import-runs", "source", "only"]);
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--help" || a === "-h") {
      console.log(USAGE);
      process.exit(0);
    }
    if (a === "--json") out.json = true;
    else if (a === "--layers-reversed") out.reversed = true;
    else if (a.startsWith("--") && known.has(a.slice(2))) {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      out[a.slice(2)] = argv[++i];
    } else usage(`unknown argument '${a}'`);
  }
  return out;
}
function num(name, dflt) {
  if (flags[name] === undefined) return dflt;
  const v = Number(flags[name]);
  if (!Number.isFinite(v) || v <= 0) usage(`--${name}: a positive number, not '${flags[name]}'`);
  return v;
}
function int(name, dflt) {
  const v = num(name, dflt);
  if (!Number.isInteger(v)) usage(`--${name}: a whole number, not '${flags[name]}'`);
  return v;
}
function usage(problem) {
  console.error(`${problem}\n\n${USAGE}`);
  process.exit(2);
}

// ---------- helpers ----------

const log = (msg) => process.stderr.write(`${msg}\n`);
const MiB = 1024 * 1024;
const ms = (x) => (Number.isFinite(x) ? `${x.toFixed(1)} ms` : "n/a");
const secs = (x) => (Number.isFinite(x) ? `${(x / 1000).toFixed(2)} s` : "n/a");
const pct = (samples) => ({ p50: percentile(samples, 50), p90: percentile(samples, 90) });
const sleep = (t) => new Promise((r) => setTimeout(r, t));

async function sha256File(path) {
  const h = createHash("sha256");
  await pipeline(createReadStream(path), h);
  return h.digest("hex");
}
const sha256 = (data) => createHash("sha256").update(data).digest("hex");

// ---------- state and cleanup ----------

let bench; // startBenchServer's answer, once the server is up
let tmp; // this run's temp dir (the archive and its layers)
let poolWork; // this run's directory on the pool (the tar targets)
const images = new Map(); // name -> id of images imported and not deleted yet
let inflightImport; // the import request in flight: a promise of its outcome
let template; // the template's name, once published
let interrupted = false;
const results = { template: undefined, import: undefined };

let cleaning;
const cleanup = () =>
  (cleaning ??= (async () => {
    interrupted = true;
    // An import in flight is let finish (seconds), so that its image can be deleted like the others.
    if (inflightImport) await Promise.race([inflightImport.catch(() => {}), sleep(120_000)]);
    killChildren();
    if (bench) {
      for (const [name] of images) {
        const r = await api("DELETE", `/v1/images/${name}`).catch(() => undefined);
        if (r?.status === 204 || r?.status === 404) images.delete(name);
      }
      if (template) await api("DELETE", `/v1/templates/${template}`).catch(() => {});
      await bench.stop().catch((err) => console.error(err));
      // `ums serve`'s own cleanup (cleanupStoppedServer) knows units and templates, not imported
      // images: those whose DELETE failed go here, from the pool.
      for (const [, id] of images) {
        const path = join(bench.pool, "imported", id);
        if (existsSync(path)) await run("btrfs", ["subvolume", "delete", path]).catch((e) => console.error(e.message));
      }
    }
    if (poolWork && existsSync(poolWork)) {
      for (const d of await readdir(poolWork).catch(() => [])) {
        await run("btrfs", ["subvolume", "delete", join(poolWork, d)]).catch(() => {});
      }
      rmSync(poolWork, { recursive: true, force: true });
    }
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  })());

let signals = 0;
function onSignal(sig) {
  if (++signals > 1) process.exit(130); // a second Ctrl-C: right away
  log(`${sig}: cleaning up (units, template, images, temp files), then stopping ums serve`);
  interrupted = true;
  // Before the server is up there is nothing of ours to delete yet: the start goes on, then stops.
  if (bench) cleanup().finally(() => process.exit(130));
}
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, onSignal);
const cap = setTimeout(() => {
  log(`benchmark exceeded ${RUN_TIMEOUT_MS / 1000} s; cleaning up`);
  cleanup().finally(() => process.exit(1));
}, RUN_TIMEOUT_MS);
cap.unref();

function api(method, path, body, { timeoutMs = 120_000 } = {}) {
  return fetch(bench.url + path, {
    method,
    headers: { ...bench.auth, ...(body !== undefined && { "content-type": "application/json" }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(timeoutMs),
  });
}

/** Runs argv in the unit (as its user) and waits for its end; the exit frame must say 0. */
async function exec(unit, argv, { timeoutMs = 120_000 } = {}) {
  const q = argv.map((a) => `cmd=${encodeURIComponent(a)}`).join("&");
  const res = await api("POST", `/v1/units/${unit}/exec?${q}`, undefined, { timeoutMs });
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200 || body.at(-2) !== 3 || body.at(-1) !== 0) {
    throw new Error(`exec in ${unit} (${argv.join(" ")}): ${res.status} ${body.toString("latin1").slice(-300)}`);
  }
  return body;
}

async function createUnit(body) {
  const r = await api("POST", "/v1/units", body);
  if (r.status !== 201) throw new Error(`create ${JSON.stringify(body)}: ${r.status} ${await r.text()}`);
}

async function deleteUnit(name) {
  const r = await api("DELETE", `/v1/units/${name}`);
  if (r.status !== 204 && r.status !== 200) log(`warning: DELETE /v1/units/${name}: ${r.status} ${await r.text()}`);
}

/** An NDJSON answer's lines; the last must be `complete`. */
async function ndjsonComplete(what, res) {
  const text = await res.text();
  const lines = text
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return { type: "unparsed", data: l };
      }
    });
  const last = lines.at(-1);
  if (res.status !== 200 || last?.type !== "complete") throw new Error(`${what}: ${res.status} ${text.slice(-500)}`);
  return { lines, last };
}

/** Time cap, Ctrl-C: stops the loops between steps. */
function checkInterrupted() {
  if (interrupted) throw new Error("interrupted");
}

// ---------- part 1: create from a template vs from the base image ----------

async function templatePart() {
  const src = "tplsrc";
  await createUnit({ name: src });
  log(`template: writing ${TEMPLATE_MIB} MiB of random data into unit ${src}...`);
  await exec(src, ["sh", "-c", `head -c ${TEMPLATE_MIB}M /dev/urandom > /home/unit/blob && sync`], {
    timeoutMs: 1_800_000,
  });
  checkInterrupted();
  log("template: checkpoint...");
  const cp = await ndjsonComplete(
    "checkpoint",
    await api("POST", `/v1/units/${src}/checkpoint`, { comment: "bench template" }, { timeoutMs: 600_000 }),
  );
  const checkpoint = cp.last.id ?? "v0";
  log(`template: publishing checkpoint ${checkpoint} as template benchtpl...`);
  const t0 = performance.now();
  const pub = await api("POST", "/v1/templates", { name: "benchtpl", from: { unit: src, checkpoint } });
  const publishMs = performance.now() - t0;
  if (pub.status !== 201) throw new Error(`publish: ${pub.status} ${await pub.text()}`);
  template = "benchtpl";
  // The source unit is not needed any more: it would only be one more running unit on the host.
  await deleteUnit(src);

  const expected = TEMPLATE_MIB * MiB;
  const one = async (name, body, verify) => {
    checkInterrupted();
    const t = performance.now();
    await createUnit({ name, ...body });
    await exec(name, ["true"]);
    const took = performance.now() - t;
    if (verify) {
      const out = (await exec(name, ["stat", "-c", "%s", "/home/unit/blob"])).toString("latin1");
      if (!out.includes(String(expected))) throw new Error(`${name}: /home/unit/blob is not ${expected} bytes: ${out}`);
    }
    await deleteUnit(name);
    return took;
  };
  log("template: warm-up (one of each, not counted)...");
  await one("tplwarm", { template: "benchtpl" }, true);
  await one("basewarm", {}, false);
  const fromTemplate = [];
  const fromBase = [];
  for (let i = 0; i < TEMPLATE_RUNS; i++) {
    // Alternating which goes first: drift of the host weighs on both alike.
    const tpl = () => one(`tpl${i}`, { template: "benchtpl" }, true).then((x) => fromTemplate.push(x));
    const base = () => one(`base${i}`, {}, false).then((x) => fromBase.push(x));
    if (i % 2 === 0) await tpl().then(base);
    else await base().then(tpl);
    log(`template: ${i + 1}/${TEMPLATE_RUNS}: template ${ms(fromTemplate.at(-1))}, base ${ms(fromBase.at(-1))}`);
  }
  const r = await api("DELETE", "/v1/templates/benchtpl");
  if (r.status === 204 || r.status === 200) template = undefined;
  else log(`warning: DELETE /v1/templates/benchtpl: ${r.status} ${await r.text()}`);

  const t = pct(fromTemplate);
  const b = pct(fromBase);
  const ratio = t.p50 / b.p50;
  results.template = {
    data_mib: TEMPLATE_MIB,
    runs: TEMPLATE_RUNS,
    publish_ms: publishMs,
    template_ms: { ...t, all: fromTemplate },
    base_ms: { ...b, all: fromBase },
    ratio_p50: ratio,
    goal_max_ratio: TEMPLATE_GOAL,
    pass: ratio <= TEMPLATE_GOAL,
  };
}

// ---------- part 2: image import vs tar -x ----------

/**
 * The paths (relative to /) of a depth-first, name-ordered walk of `root`: directories, regular
 * files and symlinks, until the files' tar size reaches `budget` bytes.
 */
async function pickFiles(root, budget) {
  const picked = [];
  let bytes = 0;
  let files = 0;
  const walk = async (dir) => {
    let names;
    try {
      names = (await readdir(dir)).sort();
    } catch {
      return;
    }
    for (const name of names) {
      if (bytes >= budget) return;
      const path = join(dir, name);
      const st = await lstat(path).catch(() => undefined);
      if (!st) continue;
      if (st.isDirectory()) {
        picked.push(path.slice(1));
        bytes += 512;
        await walk(path);
      } else if (st.isFile() || st.isSymbolicLink()) {
        picked.push(path.slice(1));
        bytes += 512 + (st.isFile() ? Math.ceil(st.size / 512) * 512 : 0) + (path.length > 100 ? 1024 : 0);
        files++;
      }
    }
  };
  // Its parents first, so that the layer has them.
  const parts = root.split("/").filter(Boolean);
  for (let i = 1; i <= parts.length; i++) picked.push(parts.slice(0, i).join("/"));
  await walk(root);
  return { picked, bytes, files };
}

async function writeRandomFile(path, bytes) {
  const fh = await open(path, "w");
  try {
    const buf = Buffer.alloc(MiB);
    for (let left = bytes; left > 0; left -= MiB) {
      randomFillSync(buf);
      await fh.write(buf, 0, Math.min(MiB, left));
    }
  } finally {
    await fh.close();
  }
}

/** The `docker save` (legacy) archive: `<id>/layer.tar` per layer, `<config sha>.json`, manifest.json. */
async function buildArchive() {
  const { tinyRootfs } = await import("../packages/server/dist/testing/tiny-rootfs.js");
  const { makeTar } = await import("../packages/server/dist/runtime/image/oci/test-archives.js");
  const outer = join(tmp, "outer");
  mkdirSync(outer);
  const target = IMPORT_MIB * MiB;

  // Layer 1: the files a unit's agent needs (glibc's loader, libc, libstdc++..., as tiny-rootfs
  // takes them from this host: usr/lib/x86_64-linux-gnu/*, usr/lib64/ld-linux-x86-64.so.2, links
  // lib -> usr/lib, lib64 -> usr/lib64, bin -> usr/bin), then many small files of a real tree.
  const l1 = join(tmp, "layer1.tar");
  await writeFile(l1, await makeTar(tinyRootfs()));
  const baseBytes = (await stat(l1)).size;
  const { picked, files } = await pickFiles(SOURCE, Math.max(0, target * SMALL_SHARE - baseBytes));
  const list = join(tmp, "layer1.list");
  await writeFile(list, `${picked.join("\0")}\0`);
  log(`import: layer 1: the base files and ${files} files of ${SOURCE}...`);
  await run("tar", ["-rf", l1, "--no-recursion", "--null", "-C", "/", "-T", list]);
  const l1Bytes = (await stat(l1)).size;

  // Layer 2: a few large files of random data, up to the archive's size.
  const big = join(tmp, "big");
  const bigBytes = Math.max(MiB, target - l1Bytes - 64 * 1024);
  const each = Math.ceil(bigBytes / BIG_FILES / 4096) * 4096;
  mkdirSync(join(big, "srv", "data"), { recursive: true });
  log(`import: layer 2: ${BIG_FILES} random files of ${(each / MiB).toFixed(1)} MiB...`);
  for (let i = 0; i < BIG_FILES; i++) await writeRandomFile(join(big, "srv", "data", `blob-${i}.bin`), each);
  const l2 = join(tmp, "layer2.tar");
  await run("tar", ["-cf", l2, "-C", big, "srv"]);
  rmSync(big, { recursive: true, force: true });

  const layers = [];
  for (const [i, l] of [l1, l2].entries()) {
    const diff = await sha256File(l);
    const id = sha256(`bench layer ${i} ${diff}`);
    mkdirSync(join(outer, id));
    await writeFile(join(outer, id, "VERSION"), "1.0");
    const path = join(outer, id, "layer.tar");
    await rename(l, path);
    layers.push({ id, diff, path, bytes: (await stat(path)).size });
  }
  const config = JSON.stringify({
    architecture: "amd64",
    os: "linux",
    config: { Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], WorkingDir: "/" },
    rootfs: { type: "layers", diff_ids: layers.map((l) => `sha256:${l.diff}`) },
  });
  const configName = `${sha256(config)}.json`;
  await writeFile(join(outer, configName), config);
  await writeFile(
    join(outer, "manifest.json"),
    JSON.stringify([
      { Config: configName, RepoTags: ["bench/images:1"], Layers: layers.map((l) => `${l.id}/layer.tar`) },
    ]),
  );
  await writeFile(join(outer, "repositories"), JSON.stringify({ "bench/images": { 1: layers.at(-1).id } }));
  const archive = join(tmp, "image.tar");
  await run("tar", [
    "-cf",
    archive,
    "-C",
    outer,
    ...(REVERSED ? layers.toReversed() : layers).map((l) => l.id),
    configName,
    "manifest.json",
    "repositories",
  ]);
  let entries = 0;
  for (const l of layers) entries += (await run("tar", ["-tf", l.path])).split("\n").filter(Boolean).length;
  return { archive, archiveBytes: (await stat(archive)).size, layers, entries, smallFiles: files };
}

/** POST /v1/images?name= with the archive as the body, until the answer's end. */
function importArchive(name, archive, size) {
  return new Promise((resolve, reject) => {
    const u = new URL(`${bench.url}/v1/images?name=${name}`);
    const req = http.request(
      u,
      {
        method: "POST",
        headers: { ...bench.auth, "content-type": "application/x-tar", "content-length": size },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          text += d;
        });
        res.on("end", () => resolve({ status: res.statusCode, type: res.headers["content-type"] ?? "", text }));
        res.on("error", reject);
      },
    );
    req.setTimeout(1_800_000, () => req.destroy(new Error(`import ${name}: no answer in 30 min`)));
    req.on("error", reject);
    // A refusal can come before the whole body is sent: the answer tells, not the upload's error.
    pipeline(createReadStream(archive, { highWaterMark: MiB }), req).catch(() => {}); // 1 MiB chunks, as `ums image import` reads
  });
}

async function timedImport(name, archive, size) {
  const wall = Date.now();
  const t = performance.now();
  inflightImport = importArchive(name, archive, size);
  let res;
  try {
    res = await inflightImport;
  } finally {
    inflightImport = undefined;
  }
  const took = performance.now() - t;
  const lines = res.text
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return { type: "unparsed", data: l };
      }
    });
  const last = lines.at(-1);
  if (last?.type === "complete" && last.image?.id) images.set(name, last.image.id);
  if (res.status !== 200 || last?.type !== "complete") {
    throw new Error(`import ${name} refused: ${res.status} ${res.type}: ${res.text.slice(-800)}`);
  }
  return { took, lines, image: last.image, phases: importPhases(wall, lines) };
}

/**
 * Where an import's time went, from the times of its NDJSON events (the server's clock, the same
 * host's): until the layers applied while the archive arrived are done ("applied K/N layers while
 * the archive arrived"), else until the first layer is applied (the upload, then the archive's
 * headers read); each layer applied after that; and from the last layer to `complete` (checks,
 * read-only flag, the image's row).
 */
function importPhases(start, lines) {
  const at = (re) => {
    const l = lines.find((x) => typeof x.data === "string" && re.test(x.data));
    return l ? Date.parse(l.time) : Number.NaN;
  };
  const text = lines.map((l) => l.data).join("\n");
  const arrived = /applied (\d+)\/(\d+) layers while the archive arrived/.exec(text);
  const applying = /applying layer \d+\/(\d+)/.exec(text);
  const layers = Number(arrived?.[2] ?? applying?.[1] ?? 0);
  const early = Number(arrived?.[1] ?? 0);
  const phases = {};
  if (early > 0) phases[`upload, layers 1-${early} applied as it arrived`] = at(/while the archive arrived/) - start;
  else phases["upload and archive read"] = at(/^applying layer 1\//) - start;
  for (let i = early + 1; i <= layers; i++) {
    const end = i < layers ? at(new RegExp(`^applying layer ${i + 1}/`)) : at(/^imported \d+ layers/);
    phases[`layer ${i}`] = end - at(new RegExp(`^applying layer ${i}/`));
  }
  phases.finish = Date.parse(lines.at(-1).time) - at(/^imported \d+ layers/);
  return phases;
}

async function deleteImage(name) {
  const r = await api("DELETE", `/v1/images/${name}`);
  if (r.status === 204) images.delete(name);
  else throw new Error(`DELETE /v1/images/${name}: ${r.status} ${await r.text()}`);
}

async function tarExtract(layers, dir) {
  await run("btrfs", ["subvolume", "create", dir]);
  const t = performance.now();
  for (const l of layers) await run("tar", ["-xf", l.path, "-C", dir]);
  return performance.now() - t;
}

/** Untimed, between runs: dirty data written out and deleted subvolumes cleaned, so that no run pays for the one before. */
async function settle() {
  await run("sync", []);
  await run("btrfs", ["subvolume", "sync", bench.pool], { timeoutMs: 60_000 }).catch(() => {});
}

async function importPart() {
  tmp = mkdtempSync(join(tmpdir(), "ums-bench-images-"));
  log(`import: building a docker save archive of about ${IMPORT_MIB} MiB in ${tmp}...`);
  const a = await buildArchive();
  const layerBytes = a.layers.reduce((s, l) => s + l.bytes, 0);
  log(
    `import: archive ${(a.archiveBytes / MiB).toFixed(1)} MiB, layers ${a.layers.map((l) => (l.bytes / MiB).toFixed(1)).join(" + ")} MiB, ~${a.entries} entries${REVERSED ? ", layer files last first" : ""}`,
  );
  poolWork = join(bench.pool, `bench-images-${process.pid}`);
  mkdirSync(poolWork);

  const importMs = [];
  const tarMs = [];
  const phases = {}; // phase -> ms of each import
  let firstImage;
  let leftOut = 0;
  for (let i = 0; i < IMPORT_RUNS; i++) {
    const doImport = async () => {
      checkInterrupted();
      await settle();
      checkInterrupted();
      const name = `benchimg${i}`;
      const r = await timedImport(name, a.archive, a.archiveBytes);
      importMs.push(r.took);
      for (const [k, v] of Object.entries(r.phases)) {
        phases[k] ??= [];
        phases[k].push(v);
      }
      firstImage ??= r.image;
      leftOut = r.lines.filter((l) => typeof l.data === "string" && l.data.startsWith("left out")).length;
      await deleteImage(name);
    };
    const doTar = async () => {
      checkInterrupted();
      await settle();
      checkInterrupted();
      const dir = join(poolWork, `tar${i}`);
      tarMs.push(await tarExtract(a.layers, dir));
      await run("btrfs", ["subvolume", "delete", dir]);
    };
    if (i % 2 === 0) await doImport().then(doTar);
    else await doTar().then(doImport);
    log(`import: ${i + 1}/${IMPORT_RUNS}: import ${secs(importMs.at(-1))}, tar -x ${secs(tarMs.at(-1))}`);
  }
  rmSync(poolWork, { recursive: true, force: true });
  poolWork = undefined;

  const im = percentile(importMs, 50);
  const tm = percentile(tarMs, 50);
  const rate = (t) => layerBytes / MiB / (t / 1000);
  const ratio = rate(im) / rate(tm);
  results.import = {
    archive_mib: a.archiveBytes / MiB,
    layer_mib: a.layers.map((l) => l.bytes / MiB),
    entries: a.entries,
    source: SOURCE,
    small_files: a.smallFiles,
    image_bytes: firstImage?.bytes ?? null,
    left_out: leftOut,
    runs: IMPORT_RUNS,
    import_ms: { median: im, all: importMs },
    import_phases_ms: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, percentile(v, 50)])),
    tar_ms: { median: tm, all: tarMs },
    import_mib_s: rate(im),
    tar_mib_s: rate(tm),
    ratio,
    goal_min_ratio: IMPORT_GOAL,
    pass: ratio >= IMPORT_GOAL,
  };
}

// ---------- main ----------

let ok = true;
try {
  bench = await startBenchServer({
    env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h", UMS_UPLINKS: "none", UMS_EGRESS_RANGES: "none" },
  });
  // bench/lib.mjs stops the server on a signal and exits at once; this script's own handler (above)
  // also deletes the template, the images and the temp files first.
  for (const sig of ["SIGINT", "SIGTERM"]) {
    for (const l of process.listeners(sig)) if (l !== onSignal) process.removeListener(sig, l);
  }
  if (interrupted) throw new Error("interrupted");
  if (ONLY !== "import") await templatePart();
  if (ONLY !== "template") await importPart();
} catch (err) {
  // After Ctrl-C or the time cap, what was in flight fails as the server goes: no error of its own.
  if (interrupted) log(`stopped: ${err?.message ?? err}`);
  else console.error(err);
  ok = false;
} finally {
  await cleanup();
}

console.log("\nums images benchmark, issue #18 (ratios: against a baseline of the same run, same host)");
const t = results.template;
if (t) {
  console.log(
    `- create from a template with ${t.data_mib} MiB of data to the first exec: p50 ${ms(t.template_ms.p50)} p90 ${ms(t.template_ms.p90)} (n ${t.runs})`,
  );
  console.log(
    `    baseline, create from the base image to the first exec: p50 ${ms(t.base_ms.p50)} p90 ${ms(t.base_ms.p90)} (n ${t.runs})`,
  );
  console.log(
    `    template / base (p50): ${t.ratio_p50.toFixed(2)}x  [goal <= ${TEMPLATE_GOAL.toFixed(2)}x: ${t.pass ? "PASS" : "MISS"}]`,
  );
  console.log(`    publish (POST /v1/templates): ${ms(t.publish_ms)}`);
}
const im = results.import;
if (im) {
  console.log(
    `- image import (POST /v1/images), ${im.archive_mib.toFixed(1)} MiB docker save archive, layers ${im.layer_mib.map((x) => x.toFixed(1)).join(" + ")} MiB, ~${im.entries} entries: median ${secs(im.import_ms.median)} = ${im.import_mib_s.toFixed(1)} MiB/s (n ${im.runs}; all: ${im.import_ms.all.map((x) => (x / 1000).toFixed(2)).join(", ")} s)`,
  );
  console.log(
    `    baseline, tar -xf of the same layers into a subvolume of the pool: median ${secs(im.tar_ms.median)} = ${im.tar_mib_s.toFixed(1)} MiB/s (all: ${im.tar_ms.all.map((x) => (x / 1000).toFixed(2)).join(", ")} s)`,
  );
  console.log(
    `    import / tar (rate): ${im.ratio.toFixed(2)}x  [goal >= ${IMPORT_GOAL.toFixed(2)}x: ${im.pass ? "PASS" : "MISS"}]`,
  );
  console.log(
    `    where the import's time went (medians, from its events): ${Object.entries(im.import_phases_ms)
      .map(([k, v]) => `${k} ${secs(v)}`)
      .join(", ")}`,
  );
  if (im.left_out > 0) console.log(`    the import left out ${im.left_out} entries (see its info lines)`);
}
console.log(`load: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
if (JSON_OUT) console.log(JSON.stringify({ ok, ...results }));
if (!ok) process.exitCode = 1;
