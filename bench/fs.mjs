#!/usr/bin/env node
// Filesystem API benchmark (issue 4): write and read of a 1 GiB file through the API
// (PUT /v1/units/{name}/fs/write, GET /v1/units/{name}/fs/read), as the unit user, i.e. through the
// agent's unit-user worker process. Each throughput is printed with its ratio to `cat` of the same file
// on the host, measured in the same run (page cache warm for both):
//   write   vs `cat <file in the unit's rootfs> | cat > <new file beside it>` (the pipe keeps cat from
//           cloning the file with copy_file_range, which btrfs does without writing any data)
//   read    vs `cat <file in the unit's rootfs> > /dev/null`
// For reference, the same transfers through curl and loopback TCP to a minimal python server (no ums):
// what any HTTP transfer of the file reaches on this host. Each figure is the median of `--runs` rounds.
// Also prints the server's peak RSS growth during the transfers (VmRSS of `ums serve`). Goal >= 70%.
//
//   npx tsc -b && npm run build:agent && node bench/fs.mjs [--mib 1024] [--runs 3]
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { arg, percentile, startBenchServer } from "./lib.mjs";

const MIB = arg("mib", 1024);
const RUNS = arg("runs", 3);
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

// The transport floor: the same file through curl and loopback TCP with (nearly) nothing in between,
// a python server that answers a GET with sendfile(2), or writes a PUT's body to a file.
const FLOOR = String.raw`
import os, socket, sys
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
    with open(path, "wb", buffering=0) as f:
        f.write(body); left = length - len(body)
        while left > 0:
            n = c.recv_into(view, min(left, len(buf)))
            if n == 0: break
            f.write(view[:n]); left -= n
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
  const hostFile = join(pool, "units", id, "rootfs", "home", "unit", "big.bin");
  const copy = `${hostFile}.cat`;
  const api = (op, extra = {}) => `/v1/units/${NAME}/fs/${op}?${q({ path: "big.bin", workingDir: HOME, ...extra })}`;
  const figures = {};
  const time = async (name, fn) => {
    const s = await secs(fn);
    figures[name] = [...(figures[name] ?? []), s];
  };
  // Rounds of every transfer, one after the other, so that a busy moment of the host hits all of them;
  // each figure is the median of its rounds.
  for (let round = 1; round <= RUNS; round++) {
    process.stderr.write(`round ${round}/${RUNS}\n`);
    await time("apiWrite", async () => {
      const r = await put(api("write"), TOTAL);
      if (r.size !== TOTAL) throw new Error(`wrote ${r.size} bytes`);
    });
    await time("apiRead", async () => {
      const n = await get(api("read"));
      if (n !== TOTAL) throw new Error(`read ${n} bytes`);
    });
    // the same as the unit's root: served by the agent process itself
    await time("rootWrite", () => put(api("write", { asRoot: "true" }), TOTAL));
    await time("rootRead", () => get(api("read", { asRoot: "true" })));
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
  }
  const peakGrowth = peak - rss0;
  const med = (name) => percentile(figures[name], 50);

  const line = (label, what, s, base) => {
    const ratio = base / s;
    console.log(
      `${label.padEnd(6)} ${what} ${mibps(s).toFixed(0).padStart(6)} MiB/s   cat ${mibps(base).toFixed(0).padStart(6)} MiB/s   ${(ratio * 100).toFixed(0)}% of cat  ${ratio >= 0.7 ? "ok" : "MISS"} (goal >= 70%)`,
    );
  };
  console.log(`fs API, ${MIB} MiB file, median of ${RUNS} rounds; unit user (worker process):`);
  line("write", "API", med("apiWrite"), med("catWrite"));
  line("read", "API", med("apiRead"), med("catRead"));
  console.log("as root (served by the agent process itself):");
  line("write", "API", med("rootWrite"), med("catWrite"));
  line("read", "API", med("rootRead"), med("catRead"));
  console.log("reference, no ums: curl to/from a minimal python server on loopback (recv_into + write; sendfile):");
  line("write", "min", med("floorWrite"), med("catWrite"));
  line("read", "min", med("floorRead"), med("catRead"));
  console.log(
    `server RSS ${rss0.toFixed(0)} MiB before, peak growth ${peakGrowth.toFixed(1)} MiB during the transfers`,
  );
} finally {
  clearInterval(sampler);
  rmSync(SRC, { force: true });
  await bench.stop();
}
