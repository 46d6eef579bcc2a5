#!/usr/bin/env node
// Filesystem API benchmark (issue 4): write and read of a 1 GiB file through the API
// (PUT /v1/units/{name}/fs/write, GET /v1/units/{name}/fs/read), as the unit user, i.e. through the
// agent's unit-user worker process. Each throughput is printed with its ratio to `cat` of the same file
// on the host, measured in the same run (page cache warm for both):
//   write   vs `cat <file in the unit's rootfs> | cat > <new file beside it>` (the pipe keeps cat from
//           cloning the file with copy_file_range, which btrfs does without writing any data)
//   read    vs `cat <file in the unit's rootfs> > /dev/null`
// Also prints the server's peak RSS growth during the transfers (VmRSS of `ums serve`). Goal >= 70%.
//
//   npx tsc -b && npm run build:agent && node bench/fs.mjs [--mib 1024]
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startBenchServer } from "./lib.mjs";

const argMib = process.argv.indexOf("--mib");
const MIB = argMib > 0 ? Number(process.argv[argMib + 1]) : 1024;
const TOTAL = MIB * 1024 * 1024;
const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const { url, auth, pool, pid } = bench;
const NAME = "fsbench";
const HOME = "/home/unit";

const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
let peak = 0;
const sampler = setInterval(() => {
  peak = Math.max(peak, rss());
}, 50);

// The client is curl (as a user would run it): a node client would spend more CPU than the server on
// this 2-core class of machine, and measure itself.
const SRC = join(tmpdir(), `ums-bench-fs-${process.pid}.bin`);

function curl(args) {
  return new Promise((resolve, reject) => {
    const p = spawn("curl", ["-sS", "-H", `authorization: ${auth.authorization}`, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => {
      out += d;
    });
    p.stderr.on("data", (d) => {
      err += d;
    });
    p.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`curl ${code}: ${err}`))));
  });
}

async function put(path, total) {
  if (total !== TOTAL) {
    const r = await fetch(url + path, {
      method: "PUT",
      headers: { ...auth, "content-type": "application/octet-stream" },
      body: "x",
    });
    return r.json();
  }
  const out = await curl([
    "-X",
    "PUT",
    "-H",
    "content-type: application/octet-stream",
    "-H",
    "Expect:",
    "-T",
    SRC,
    "-w",
    "\n%{http_code}",
    url + path,
  ]);
  const [body, code] = out.split("\n");
  if (code !== "200") throw new Error(`write answered ${code}: ${body}`);
  return JSON.parse(body);
}

async function get(path) {
  const out = await curl(["-o", "/dev/null", "-w", "%{http_code} %{size_download}", url + path]);
  const [code, size] = out.split(" ");
  if (code !== "200") throw new Error(`read answered ${code}`);
  return Number(size);
}

const secs = async (fn) => {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
};
const mibps = (s) => MIB / s;
const q = (o) => new URLSearchParams(o).toString();

try {
  const created = await fetch(`${url}/v1/units`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name: NAME }),
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
  const { id } = await created.json();
  spawnSync("sh", ["-c", `head -c ${TOTAL} /dev/urandom > ${SRC}`]);
  spawnSync("cat", [SRC], { stdio: ["ignore", "ignore", "ignore"] }); // in the page cache
  // wake the unit and its worker (not timed)
  await put(`/v1/units/${NAME}/fs/write?${q({ path: "warm", workingDir: HOME })}`, 1);
  const rss0 = rss();
  peak = rss0;

  const apiWrite = await secs(async () => {
    const r = await put(`/v1/units/${NAME}/fs/write?${q({ path: "big.bin", workingDir: HOME })}`, TOTAL);
    if (r.size !== TOTAL) throw new Error(`wrote ${r.size} bytes`);
  });
  const apiRead = await secs(async () => {
    const n = await get(`/v1/units/${NAME}/fs/read?${q({ path: "big.bin", workingDir: HOME })}`);
    if (n !== TOTAL) throw new Error(`read ${n} bytes`);
  });
  const peakGrowth = peak - rss0;
  // the same as the unit's root: served by the agent process itself
  const rootWrite = await secs(() =>
    put(`/v1/units/${NAME}/fs/write?${q({ path: "big.bin", workingDir: HOME, asRoot: "true" })}`, TOTAL),
  );
  const rootRead = await secs(() =>
    get(`/v1/units/${NAME}/fs/read?${q({ path: "big.bin", workingDir: HOME, asRoot: "true" })}`),
  );

  const hostFile = join(pool, "units", id, "rootfs", "home", "unit", "big.bin");
  const copy = `${hostFile}.cat`;
  const catWrite = await secs(async () => {
    const r = spawnSync("sh", ["-c", 'cat "$1" | cat > "$2"', "sh", hostFile, copy]);
    if (r.status !== 0) throw new Error(`cat write: ${r.stderr}`);
  });
  rmSync(copy, { force: true });
  const catRead = await secs(async () => {
    const r = spawnSync("sh", ["-c", 'cat "$1" > /dev/null', "sh", hostFile]);
    if (r.status !== 0) throw new Error(`cat read: ${r.stderr}`);
  });

  const line = (label, s, base) => {
    const ratio = base / s;
    console.log(
      `${label.padEnd(6)} API ${mibps(s).toFixed(0).padStart(6)} MiB/s   cat ${mibps(base).toFixed(0).padStart(6)} MiB/s   ${(ratio * 100).toFixed(0)}% of cat  ${ratio >= 0.7 ? "ok" : "MISS"} (goal >= 70%)`,
    );
  };
  console.log(`fs API, ${MIB} MiB file, unit user (worker process)`);
  line("write", apiWrite, catWrite);
  line("read", apiRead, catRead);
  console.log("as root (served by the agent process itself):");
  line("write", rootWrite, catWrite);
  line("read", rootRead, catRead);
  console.log(
    `server RSS ${rss0.toFixed(0)} MiB before, peak growth ${peakGrowth.toFixed(1)} MiB during the transfers`,
  );
} finally {
  clearInterval(sampler);
  rmSync(SRC, { force: true });
  await bench.stop();
}
