#!/usr/bin/env node
// Unit runtime benchmark (issue "Units run for real"): create, cold boot + first exec, exec on a
// running unit, warm → running + exec, idle memory. Each figure is printed with its ratio to a
// physical baseline measured in the same run on the same host:
//   create            vs a bare `btrfs subvolume snapshot` of the same image
//   cold first exec   vs a bare `runc run` of /bin/true in a snapshot of the same image
//   exec on running   vs a bare `nsenter -t <unit pid 1> -a true` into the same container, and a
//                     host spawn (`runc exec` cannot join a unit: its network namespace belongs to
//                     the host, which runc's setns order inside the user namespace is refused)
//   warm → running    vs a bare `runc resume` + `nsenter -a true`
//   idle memory       vs a bare idle node process on the host
//
//   npx tsc -b && npm run build:agent && node bench/runtime.mjs [--n 30]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fmt, percentile, startBenchServer, timeIt } from "./lib.mjs";

const N = Number(process.argv[process.argv.indexOf("--n") + 1]) || 30;
const bench = await startBenchServer({ env: { UMS_IDLE_WARM: "1h", UMS_IDLE_COLD: "1h" } });
const { url, auth, dataDir, pool } = bench;
const post = (path, body) =>
  fetch(url + path, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
const exec = async (name, cmd = ["true"]) => {
  const q = cmd.map((c) => `cmd=${encodeURIComponent(c)}`).join("&");
  const res = await fetch(`${url}/v1/units/${name}/exec?${q}`, { method: "POST", headers: auth });
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200 || body.at(-2) !== 3) throw new Error(`exec failed: ${res.status} ${body}`);
  return body;
};
const sh = (cmd, args) => {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}): ${r.stderr}`);
  return r;
};
const initPid = (id) => JSON.parse(execFileSync("runc", ["--root", runcRoot, "state", id]).toString()).pid;
const nsenterTrue = (id) => sh("nsenter", ["-t", String(initPid(id)), "-a", "true"]);
const runcRoot = join(dataDir, "runc");
const rows = [];
const report = (name, samples, baselines, goalMs) => {
  const p50 = percentile(samples, 50);
  const cols = baselines.map(
    ([label, base]) => `${(p50 / percentile(base, 50)).toFixed(2)}x ${label} (${fmt(percentile(base, 50))})`,
  );
  rows.push({ name, p50, p99: percentile(samples, 99), goalMs, cols });
};

try {
  // --- create (cold) vs bare snapshot
  const image = join(pool, "images", "test");
  const bareDir = join(pool, "units", `bench-bare-${process.pid}`);
  mkdirSync(bareDir, { recursive: true });
  const snap = [];
  for (let i = 0; i < N; i++) {
    snap.push(await timeIt(async () => sh("btrfs", ["subvolume", "snapshot", image, join(bareDir, `s${i}`)])));
  }
  for (let i = 0; i < N; i++) sh("btrfs", ["subvolume", "delete", join(bareDir, `s${i}`)]);
  const create = [];
  for (let i = 0; i < N; i++) {
    create.push(
      await timeIt(async () => {
        const r = await post("/v1/units", { name: `c${i}` });
        if (r.status !== 201) throw new Error(`create ${r.status} ${await r.text()}`);
      }),
    );
  }
  report("create (cold)", create, [["btrfs snapshot", snap]], 30);

  // --- cold boot + first exec vs bare runc run of /bin/true
  const cold = [];
  for (let i = 0; i < N; i++) cold.push(await timeIt(() => exec(`c${i}`)));
  const bareRun = [];
  const bundle = join(bareDir, "bundle");
  mkdirSync(bundle, { recursive: true });
  const unitId = (await (await fetch(`${url}/v1/units/c0`, { headers: auth })).json()).id;
  const spec = JSON.parse(readFileSync(join(dataDir, "run", unitId, "bundle", "config.json"), "utf8"));
  for (let i = 0; i < Math.min(N, 15); i++) {
    const rootfs = join(bareDir, `r${i}`);
    sh("btrfs", ["subvolume", "snapshot", image, rootfs]);
    const bare = {
      ...spec,
      process: { ...spec.process, args: ["/bin/true"] },
      root: { path: rootfs, readonly: false },
      mounts: spec.mounts.filter((m) => !m.destination.startsWith("/.unit")),
      linux: {
        ...spec.linux,
        namespaces: spec.linux.namespaces.filter((n) => n.type !== "network").concat([{ type: "network" }]),
        cgroupsPath: `/ums-bench-bare/r${i}`,
      },
    };
    writeFileSync(join(bundle, "config.json"), JSON.stringify(bare));
    bareRun.push(
      await timeIt(async () => sh("runc", ["--root", join(bareDir, "runc"), "run", "--bundle", bundle, `bare${i}`])),
    );
    sh("runc", ["--root", join(bareDir, "runc"), "delete", "--force", `bare${i}`]);
    sh("btrfs", ["subvolume", "delete", rootfs]);
  }
  report("cold → first exec of true", cold, [["runc run /bin/true", bareRun]], 100);

  // --- exec on a running unit vs nsenter into it and a host spawn
  const hot = [];
  for (let i = 0; i < 20; i++) await exec("c0");
  for (let i = 0; i < N * 5; i++) hot.push(await timeIt(() => exec("c0")));
  const runcExec = [];
  const unitPid1 = String(initPid(unitId));
  for (let i = 0; i < N; i++) runcExec.push(await timeIt(async () => sh("nsenter", ["-t", unitPid1, "-a", "true"])));
  const hostSpawn = [];
  for (let i = 0; i < N * 5; i++) hostSpawn.push(await timeIt(async () => sh("true", [])));
  report(
    "exec of true on a running unit (HTTP)",
    hot,
    [
      ["nsenter -a", runcExec],
      ["host spawn", hostSpawn],
    ],
    3,
  );

  // --- warm → running + exec vs runc resume + nsenter
  const ids = [];
  for (let i = 0; i < N; i++) ids.push((await (await fetch(`${url}/v1/units/c${i}`, { headers: auth })).json()).id);
  const warm = [];
  for (let i = 0; i < N; i++) {
    await fetch(`${url}/v1/units/c${i}/exec?cmd=true`, { method: "POST", headers: auth }).then((r) => r.arrayBuffer());
  }
  const bareResume = [];
  for (let i = 0; i < N; i++) {
    execFileSync("runc", ["--root", runcRoot, "pause", ids[i]]);
    bareResume.push(
      await timeIt(async () => {
        sh("runc", ["--root", runcRoot, "resume", ids[i]]);
        nsenterTrue(ids[i]);
      }),
    );
  }
  // The server pauses units itself when they are idle: a second server with a 1 s idle timer
  // measures warm → running through the API.
  await bench.stop();
  const warmBench = await startBenchServer({ org: "warm", env: { UMS_IDLE_WARM: "1s", UMS_IDLE_COLD: "1h" } });
  const wpost = (path, body) =>
    fetch(warmBench.url + path, {
      method: "POST",
      headers: { ...warmBench.auth, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const wexec = async (name) => {
    const r = await fetch(`${warmBench.url}/v1/units/${name}/exec?cmd=true`, {
      method: "POST",
      headers: warmBench.auth,
    });
    const b = Buffer.from(await r.arrayBuffer());
    if (b.at(-2) !== 3) throw new Error(`exec failed ${r.status}`);
  };
  const WN = Math.min(N, 10);
  for (let i = 0; i < WN; i++) {
    await wpost("/v1/units", { name: `w${i}` });
    await wexec(`w${i}`);
  }
  const waitWarm = async (name) => {
    for (;;) {
      const u = await (await fetch(`${warmBench.url}/v1/units/${name}`, { headers: warmBench.auth })).json();
      if (u.status === "warm") return;
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  for (let i = 0; i < WN; i++) await waitWarm(`w${i}`);
  for (let i = 0; i < WN; i++) warm.push(await timeIt(() => wexec(`w${i}`)));
  report("warm → running + exec", warm, [["runc resume + nsenter -a", bareResume]], 20);

  // --- idle memory: PID 1 + agent RSS of a running unit vs an idle node on the host
  await new Promise((r) => setTimeout(r, 100));
  const idle = await (await fetch(`${warmBench.url}/v1/units/w0`, { headers: warmBench.auth })).json();
  await wexec("w0");
  const wroot = join(warmBench.dataDir, "runc");
  const pid1 = JSON.parse(execFileSync("runc", ["--root", wroot, "state", idle.id]).toString()).pid;
  const rss = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
  // Private memory (USS): what this unit costs beyond pages shared with every other node process.
  const uss = (pid) => {
    const t = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(t)?.[1] ?? 0);
    return (kb("Private_Clean") + kb("Private_Dirty")) / 1024;
  };
  const kids = readFileSync(`/proc/${pid1}/task/${pid1}/children`, "utf8")
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
  const unitMb = rss(pid1) + kids.reduce((a, p) => a + rss(p), 0);
  const unitUss = uss(pid1) + kids.reduce((a, p) => a + uss(p), 0);
  const bareNode = execFileSync("node", [
    "-e",
    "setTimeout(()=>{console.log(process.memoryUsage().rss/1048576)},300)",
  ]).toString();
  rows.push({
    name: "idle running unit memory (PID 1 + agent RSS)",
    p50: unitMb,
    p99: unitMb,
    goalMs: 40,
    unit: "MB",
    cols: [
      `${(unitMb / Number(bareNode)).toFixed(2)}x idle host node (${Number(bareNode).toFixed(1)} MB)`,
      `private memory (USS, not shared with other units) ${unitUss.toFixed(1)} MB`,
    ],
  });
  await warmBench.stop();
  rmSync(bareDir, { recursive: true, force: true });
  // The bare runs' cgroups (runc removes each container's own; the parent stays).
  for (const c of readdirSync("/sys/fs/cgroup")) {
    try {
      rmdirSync(join("/sys/fs/cgroup", c, "ums-bench-bare"));
    } catch {}
  }
} catch (err) {
  console.error(err);
  await bench.stop().catch(() => {});
  process.exitCode = 1;
}

console.log("\nums runtime benchmark (ratios: this figure's p50 / baseline p50, same host, same run)");
for (const r of rows) {
  const unit = r.unit ?? "ms";
  const val = unit === "MB" ? `${r.p50.toFixed(1)} MB` : `p50 ${fmt(r.p50)}  p99 ${fmt(r.p99)}`;
  const goal = `goal <= ${r.goalMs} ${unit}: ${r.p50 <= r.goalMs ? "PASS" : "MISS"}`;
  console.log(`- ${r.name}: ${val}  [${goal}]\n    ${r.cols.join("; ")}`);
}
