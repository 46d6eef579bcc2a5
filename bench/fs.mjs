#!/usr/bin/env node
// Filesystem API benchmark (issue #16 part 1): write and read of a 1 GiB file through the API
// (PUT /v1/units/{name}/fs/write, GET /v1/units/{name}/fs/read), as the unit user (the agent's
// unit-user worker process) and asRoot (the agent itself). Each throughput is printed with its ratio to
// two baselines measured in the same run (page cache warm for all):
//   the transport floor: the same bytes through curl and loopback TCP to a minimal python server (no
//           ums): a PUT's body written to a file with recv_into + write, a GET answered with sendfile(2)
//   the durable write floor: that write made as durable as the fs API's (flushed behind every 64 MiB,
//           fsync'ed before the answer), printed beside the writes: the API answers a write once its
//           bytes are on disk, which the plain floor does not wait for
//   cat     write: `cat <file in the unit's rootfs> | cat > <new file beside it>` (the pipe keeps cat
//           from cloning the file with copy_file_range, which btrfs does without writing any data);
//           read: `cat <file in the unit's rootfs> > /dev/null`
// Goals (issue #16): >= 90% of the transport floor and >= 60% of cat. Each figure is the median of
// `--runs` rounds; every transfer runs once per round, so that a busy moment of the host hits all of
// them. Also prints the CPU time per GiB of `ums serve` and of the unit's process that served each
// transfer (the worker, or the agent asRoot; steadier than wall times on a busy host), and the peak RSS
// growth during the transfers of `ums serve`, of the unit's agent and of its worker (flat memory is a
// goal too).
//
// With `--against DIR` (another checkout of ums, built), that tree's `ums serve` runs beside this one's,
// with a unit of its own, and each transfer of one is followed by the same of the other: on a small
// shared host the load moves more from minute to minute than a change does.
//
//   npx tsc -b && npm run build:agent && node bench/fs.mjs [--mib 1024] [--runs 3] [--against DIR]
import { spawn, spawnSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { arg, assertOwnPackages, percentile, procCpuMs, ROOT } from "./lib.mjs";

const MIB = arg("mib", 1024);
const RUNS = arg("runs", 3);
const TOTAL = MIB * 1024 * 1024;
const againstAt = process.argv.indexOf("--against");
const against = againstAt > 0 && process.argv[againstAt + 1] ? resolve(process.argv[againstAt + 1]) : undefined;
const trees = { this: ROOT, ...(against && { other: against }) };
if (against) assertOwnPackages(against);
const names = Object.keys(trees);
const NAME = "fsbench";
const HOME = "/home/unit";

const rssOf = (p) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, "utf8"))?.[1] ?? 0) / 1024;
  } catch {
    return 0; // gone meanwhile
  }
};
/** CPU seconds (user + system, all threads) `pid` has used: /proc/<pid>/stat's utime and stime. */
const cpuOf = (p) => {
  try {
    return procCpuMs(p).own / 1000;
  } catch {
    return 0;
  }
};
/** The unit's agent and its worker: its node processes, found by the unit's cgroup (as the tests do). */
function unitNodes(id) {
  const found = { agent: 0, worker: 0 };
  for (const p of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${p}/cgroup`, "utf8").includes(`/${id}\n`)) continue;
      const args = readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0");
      if (!/\/agent\.(mjs|cjs)$/.test(args[1] ?? "")) continue; // .mjs: a tree before the code cache
      found[args.includes("--fs-worker") ? "worker" : "agent"] = Number(p);
    } catch {}
  }
  return found;
}

/** Per tree: its bench server, its unit, and the RSS of its three processes (before, peak). */
const at = {};
const sample = () => {
  for (const t of Object.values(at)) {
    if (!t.pids) continue;
    for (const [k, p] of Object.entries(t.pids)) t.peak[k] = Math.max(t.peak[k] ?? 0, rssOf(p));
  }
};
const sampler = setInterval(sample, 50);

// The client is curl (as a user would run it): a node client would spend more CPU than the server on
// this 2-core class of machine, and measure itself.
const SRC = join(tmpdir(), `ums-bench-fs-${process.pid}.bin`);

function curl(t, args) {
  return new Promise((resolve, reject) => {
    const p = spawn("curl", ["-sS", "-H", `authorization: ${t.bench.auth.authorization}`, ...args], {
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

async function put(t, path) {
  const out = await curl(t, [
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
    t.bench.url + path,
  ]);
  const [body, code] = out.split("\n");
  if (code !== "200") throw new Error(`write answered ${code}: ${body}`);
  return JSON.parse(body);
}

async function get(t, path) {
  const out = await curl(t, ["-o", "/dev/null", "-w", "%{http_code} %{size_download}", t.bench.url + path]);
  const [code, size] = out.split(" ");
  if (code !== "200") throw new Error(`read answered ${code}`);
  return Number(size);
}

// The transport floor: the same file through curl and loopback TCP with (nearly) nothing in between,
// a python server that answers a GET with sendfile(2), or writes a PUT's body to a file. And the
// durable write floor: the same write made as durable as ums makes its writes (an fdatasync started
// every 64 MiB behind the writes, an fsync before the answer): the fs API answers a write once its
// bytes are on disk, which the plain floor does not wait for.
const FLOOR = String.raw`
import os, socket, sys, threading
mode, path = sys.argv[1], sys.argv[2]
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
head = b""
while b"\r\n\r\n" not in head: head += c.recv(65536)
head, body = head.split(b"\r\n\r\n", 1)
if mode == "send":
    size = os.path.getsize(path)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
    with open(path, "rb") as f: c.sendfile(f)
else:
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
    buf = bytearray(1 << 20); view = memoryview(buf)
    durable = mode == "recv-durable"
    flushing = None; since = 0
    with open(path, "wb", buffering=0) as f:
        f.write(body); left = length - len(body)
        while left > 0:
            n = c.recv_into(view, min(left, len(buf)))
            if n == 0: break
            f.write(view[:n]); left -= n; since += n
            # as ums's write: an fdatasync started every 64 MiB behind the writes, one at a time
            if durable and since >= 64 << 20 and not (flushing and flushing.is_alive()):
                since = 0
                flushing = threading.Thread(target=os.fdatasync, args=(f.fileno(),)); flushing.start()
        if durable:
            if flushing: flushing.join()
            os.fsync(f.fileno())
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
c.close()
`;

async function floor(mode, path) {
  const py = spawn("python3", ["-c", FLOOR, mode, path], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    py.stdout.once("data", (d) => resolve(Number(String(d).trim())));
    py.once("exit", (code) => reject(new Error(`floor server exited (${code})`)));
  });
  const args =
    mode === "send"
      ? ["-sS", "-o", "/dev/null", `http://127.0.0.1:${port}/`]
      : ["-sS", "-X", "PUT", "-H", "Expect:", "-T", SRC, "-o", "/dev/null", `http://127.0.0.1:${port}/`];
  const curlDone = new Promise((resolve, reject) =>
    spawn("curl", args, { stdio: "ignore" }).on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`curl ${code}`)),
    ),
  );
  await Promise.all([curlDone, new Promise((resolve) => py.once("exit", resolve))]);
}

const secs = async (fn) => {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
};
const mibps = (s) => MIB / s;
const q = (o) => new URLSearchParams(o).toString();
const api = (op, extra = {}) => `/v1/units/${NAME}/fs/${op}?${q({ path: "big.bin", workingDir: HOME, ...extra })}`;

try {
  for (const [k, dir] of Object.entries(trees)) {
    const lib = await import(`${dir}/bench/lib.mjs`);
    const bench = await lib.startBenchServer({ org: `fs-${k}`, env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
    at[k] = { bench, peak: {} };
    const created = await fetch(`${bench.url}/v1/units`, {
      method: "POST",
      headers: { ...bench.auth, "content-type": "application/json" },
      body: JSON.stringify({ name: NAME }),
    });
    if (created.status !== 201) throw new Error(`${k}: create: ${created.status} ${await created.text()}`);
    at[k].id = (await created.json()).id;
    at[k].hostFile = join(bench.pool, "units", at[k].id, "rootfs", "home", "unit", "big.bin");
  }
  spawnSync("sh", ["-c", `head -c ${TOTAL} /dev/urandom > ${SRC}`]);
  spawnSync("cat", [SRC], { stdio: ["ignore", "ignore", "ignore"] }); // in the page cache
  for (const t of Object.values(at)) {
    // wake the unit and its worker (not timed)
    const r = await fetch(`${t.bench.url}/v1/units/${NAME}/fs/write?${q({ path: "warm", workingDir: HOME })}`, {
      method: "PUT",
      headers: { ...t.bench.auth, "content-type": "application/octet-stream" },
      body: "x",
    });
    if (r.status !== 200) throw new Error(`warm-up write: ${r.status} ${await r.text()}`);
    const nodes = unitNodes(t.id);
    if (!nodes.agent || !nodes.worker)
      throw new Error(`the unit's agent and worker not found: ${JSON.stringify(nodes)}`);
    t.pids = { server: t.bench.pid, ...nodes };
    t.before = Object.fromEntries(Object.entries(t.pids).map(([k, p]) => [k, rssOf(p)]));
    Object.assign(t.peak, t.before);
  }
  const hostFile = at.this.hostFile;
  const copy = `${hostFile}.cat`;
  const figures = {};
  const time = async (name, fn) => {
    const s = await secs(fn);
    figures[name] = [...(figures[name] ?? []), s];
  };
  for (let round = 1; round <= RUNS; round++) {
    process.stderr.write(`round ${round}/${RUNS}\n`);
    // Each transfer of every tree in turn, the order of the trees swapped every other round.
    const order = round % 2 ? names : [...names].reverse();
    // With the CPU time of the server and of the unit's process that served it (the worker, or the
    // agent asRoot) during the transfer: steadier than the wall time on a busy host.
    const each = async (name, fn) => {
      for (const k of order) {
        const t = at[k];
        const unit = name.startsWith("root") ? t.pids.agent : t.pids.worker;
        const c0 = [cpuOf(t.pids.server), cpuOf(unit)];
        await time(`${k}.${name}`, () => fn(t));
        figures[`${k}.${name}.server`] = [...(figures[`${k}.${name}.server`] ?? []), cpuOf(t.pids.server) - c0[0]];
        figures[`${k}.${name}.unit`] = [...(figures[`${k}.${name}.unit`] ?? []), cpuOf(unit) - c0[1]];
      }
    };
    await each("apiWrite", async (t) => {
      const r = await put(t, api("write"));
      if (r.size !== TOTAL) throw new Error(`wrote ${r.size} bytes`);
    });
    await each("apiRead", async (t) => {
      const n = await get(t, api("read"));
      if (n !== TOTAL) throw new Error(`read ${n} bytes`);
    });
    // the same as the unit's root: served by the agent process itself
    await each("rootWrite", async (t) => {
      const r = await put(t, api("write", { asRoot: "true" }));
      if (r.size !== TOTAL) throw new Error(`wrote ${r.size} bytes`);
    });
    await each("rootRead", async (t) => {
      const n = await get(t, api("read", { asRoot: "true" }));
      if (n !== TOTAL) throw new Error(`read ${n} bytes`);
    });
    await time("catWrite", async () => {
      const r = spawnSync("sh", ["-c", 'cat "$1" | cat > "$2"', "sh", hostFile, copy]);
      if (r.status !== 0) throw new Error(`cat write: ${r.stderr}`);
    });
    rmSync(copy, { force: true });
    await time("catRead", async () => {
      const r = spawnSync("sh", ["-c", 'cat "$1" > /dev/null', "sh", hostFile]);
      if (r.status !== 0) throw new Error(`cat read: ${r.stderr}`);
    });
    await time("floorRead", () => floor("send", hostFile));
    await time("floorWrite", () => floor("recv", copy));
    rmSync(copy, { force: true });
    await time("floorWriteDurable", () => floor("recv-durable", copy));
    rmSync(copy, { force: true });
  }
  sample();
  const med = (name) => percentile(figures[name], 50);
  const pct = (r) => `${(r * 100).toFixed(0)}%`;
  const gib = (name) => ((med(name) * 1024) / MIB).toFixed(2);
  console.log(
    `fs API, ${MIB} MiB file, median of ${RUNS} rounds; goals (issue #16): >= 90% of the transport floor and >= 60% of cat`,
  );
  for (const k of names) {
    const t = at[k];
    if (names.length > 1) console.log(`${k === "this" ? "this tree" : against}:`);
    console.log("                         MiB/s  of floor  of cat        CPU s/GiB: server  unit   of durable floor");
    const line = (op, label, name) => {
      const s = med(`${k}.${name}`);
      const ofFloor = med(op === "write" ? "floorWrite" : "floorRead") / s;
      const ofCat = med(op === "write" ? "catWrite" : "catRead") / s;
      const ok = ofFloor >= 0.9 && ofCat >= 0.6;
      console.log(
        `  ${op.padEnd(6)} ${label.padEnd(10)} ${mibps(s).toFixed(0).padStart(6)} ${pct(ofFloor).padStart(9)} ${pct(ofCat).padStart(7)}  ${(ok ? "ok" : "MISS").padEnd(4)} ${gib(`${k}.${name}.server`).padStart(20)} ${gib(`${k}.${name}.unit`).padStart(5)}${op === "write" ? pct(med("floorWriteDurable") / s).padStart(19) : ""}`,
      );
    };
    line("write", "unit user", "apiWrite");
    line("read", "unit user", "apiRead");
    line("write", "asRoot", "rootWrite");
    line("read", "asRoot", "rootRead");
    const grow = (p) => `${p} ${t.before[p].toFixed(0)} MiB +${(t.peak[p] - t.before[p]).toFixed(1)}`;
    console.log(`  peak RSS growth during the transfers: ${grow("server")}, ${grow("agent")}, ${grow("worker")}`);
  }
  console.log("baselines, same run:");
  const base = (what, name) => console.log(`  ${what.padEnd(58)} ${mibps(med(name)).toFixed(0).padStart(6)} MiB/s`);
  base("transport floor, write: curl -> python recv_into + write", "floorWrite");
  base("durable write floor: the same, flushed behind, fsync'ed", "floorWriteDurable");
  base("transport floor, read: python sendfile(2) -> curl", "floorRead");
  base("cat write: cat file | cat > copy", "catWrite");
  base("cat read: cat file > /dev/null", "catRead");
} finally {
  clearInterval(sampler);
  rmSync(SRC, { force: true });
  for (const t of Object.values(at)) await t.bench.stop();
}
