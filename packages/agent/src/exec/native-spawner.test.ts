// ums-spawn (native/spawner.c, native-spawner.ts) against the real bundled agent: that exec uses it,
// that the agent survives it being killed, and that no other user of the unit can reach it.
// exec-pipes.test.ts runs the whole exec suite through it and through node's spawn.
import assert from "node:assert/strict";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { bundlePath, ExecClient, eventually, query, type RunningAgent, run, startAgent } from "../testing/harness.js";
import { decodeWaitStatus, encodeRequest } from "./native-spawner.js";

const node = process.execPath;

/** The pid of the agent's ums-spawn, or 0. */
function spawnerPid(agent: RunningAgent): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === agent.proc.pid && stat.includes("(ums-spawn)")) return Number(entry);
    } catch {}
  }
  return 0;
}

/** The name of the process that started the exec's process. */
async function parentName(agent: RunningAgent): Promise<string> {
  const r = await run(agent, { cmd: ["sh", "-c", "cat /proc/$PPID/comm"] });
  assert.equal(r.exitCode, 0, r.stderr.toString());
  return r.stdout.toString().trim();
}

describe("ums-spawn", () => {
  const agents: RunningAgent[] = [];
  after(async () => {
    for (const a of agents) await a.stop();
  });
  const start = async (env: Record<string, string> = {}) => {
    const a = await startAgent(env);
    agents.push(a);
    return a;
  };

  test("exec's processes are its children; with UMS_AGENT_SPAWNER=node, the agent's", async () => {
    const native = await start();
    // A boot's first execs may come before it is up (it starts a second after the agent): node's spawn.
    await eventually(async () => (await parentName(native)) === "ums-spawn", "ums-spawn up", 5000);
    const viaNode = await start({ UMS_AGENT_SPAWNER: "node" });
    assert.notEqual(await parentName(viaNode), "ums-spawn");
    assert.equal(spawnerPid(viaNode), 0, "no ums-spawn is started");
  });

  test("killed: its running session ends when its process does, exec goes on, and it comes back", async () => {
    const agent = await start();
    await eventually(async () => (await parentName(agent)) === "ums-spawn", "ums-spawn up", 5000);
    const first = spawnerPid(agent);
    assert.ok(first > 0);
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["sh", "-c", "echo up; read x; echo done"], stdin: true })}`,
    );
    await eventually(async () => c.stream(1).toString() === "up\n", "the session's first line", 5000);
    process.kill(first, "SIGKILL");
    await eventually(async () => agent.stderr().includes("ums-spawn is gone"), "the agent to notice", 5000);
    // The orphan still reads its stdin and writes its stdout; its end is seen, its status is not.
    c.sendStdin("x\n");
    assert.equal(await c.closed, 4255);
    assert.equal(c.stream(1).toString(), "up\ndone\n");
    const ok = await run(agent, { cmd: ["sh", "-c", "echo again"] });
    assert.equal(ok.stdout.toString(), "again\n");
    await eventually(async () => (await parentName(agent)) === "ums-spawn", "ums-spawn back", 5000);
    assert.notEqual(spawnerPid(agent), first);
  });

  test("its socket taken away (root empties the run dir): exec goes on, a running session keeps its status, and a new one comes", async () => {
    const runDir = mkdtempSync(join(tmpdir(), "ums-spawn-run-"));
    const agent = await start({ UMS_AGENT_RUN_DIR: runDir });
    await eventually(async () => (await parentName(agent)) === "ums-spawn", "ums-spawn up", 5000);
    const first = spawnerPid(agent);
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["sh", "-c", "echo up; read x; echo done; exit 7"], stdin: true })}`,
    );
    await eventually(async () => c.stream(1).toString() === "up\n", "the session's first line", 5000);
    // What `rm -rf /run/*` as root in a unit does to the helper's socket.
    rmSync(runDir, { recursive: true, force: true });
    // Before: every exec failed with "cannot start /usr/bin/sh: ENOENT" until the unit restarted.
    const r = await run(agent, { cmd: ["sh", "-c", "echo after"] });
    assert.equal(r.exitCode, 0, r.stderr.toString());
    assert.equal(r.stdout.toString(), "after\n");
    assert.match(agent.stderr(), /cannot reach the agent's socket/);
    // The session that ums-spawn started still ends with its own status: the helper stayed for it.
    c.sendStdin("x\n");
    assert.equal(await c.closed, 4007);
    assert.equal(c.stream(1).toString(), "up\ndone\n");
    await eventually(async () => (await parentName(agent)) === "ums-spawn", "a new ums-spawn", 8000);
    const second = spawnerPid(agent);
    assert.ok(second > 0 && second !== first, `a new helper (${first} → ${second})`);
    const ended = async () => {
      try {
        readFileSync(`/proc/${first}/stat`, "utf8");
        return false;
      } catch {
        return true;
      }
    };
    await eventually(ended, "the old helper to end once its session did", 5000);
    rmSync(runDir, { recursive: true, force: true });
  });

  test("attack: another user of the unit cannot reach its socket; a forged stream is dropped", async () => {
    const runDir = mkdtempSync(join(tmpdir(), "ums-spawn-run-"));
    chmodSync(runDir, 0o755);
    mkdirSync(join(runDir, "home"), { mode: 0o777 });
    try {
      const agent = await start({
        UMS_AGENT_RUN_DIR: runDir,
        UMS_AGENT_UID: "65534",
        UMS_AGENT_GID: "65534",
        UMS_AGENT_HOME: join(runDir, "home"),
      });
      const spawnDir = () => readdirSync(runDir).find((f) => f.startsWith(".spawn-"));
      await eventually(async () => spawnDir() !== undefined, "ums-spawn's directory", 5000);
      const dir = spawnDir() as string;
      const sock = join(runDir, dir, "s");
      const probe = `require("net").connect(${JSON.stringify(sock)}).on("connect", () => { console.log("connected"); process.exit(0) }).on("error", (e) => console.log(e.code))`;
      const r = await run(agent, { cmd: [node, "-e", probe], dir: "/" });
      assert.equal(r.stdout.toString().trim(), "EACCES", r.stderr.toString());
      // The agent's own user (root here, as in a unit) can connect: a stream for no request is closed.
      const forged = connect(sock);
      forged.write(Buffer.from([1, 0, 0, 0, 1, 0, 0, 0]));
      await new Promise<void>((resolve) => forged.on("close", () => resolve()).on("error", () => {}));
      // A header cut short by the end of its stream is dropped too, without harm to the agent.
      const short = connect(sock);
      short.end(Buffer.from([1, 0, 0]));
      await new Promise<void>((resolve) => short.on("close", () => resolve()).on("error", () => {}));
      assert.doesNotMatch(agent.stderr(), /uncaught/);
      const ok = await run(agent, { cmd: ["id", "-u"], dir: "/" });
      assert.equal(ok.stdout.toString(), "65534\n");
    } finally {
      rmSync(runDir, { recursive: true, force: true });
    }
  });

  test("not built: exec starts processes with node", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ums-agent-copy-"));
    try {
      for (const f of ["agent.cjs", "agent-bundle.cjs", "agent-bundle.cache"]) {
        copyFileSync(join(dirname(bundlePath), f), join(dir, f));
      }
      const agent = await startAgent({}, [], join(dir, "agent.cjs"));
      agents.push(agent);
      assert.notEqual(await parentName(agent), "ums-spawn");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("ums-spawn's protocol", () => {
  test("a request frame: length, six words, then file, cwd, argv and env, each NUL-terminated", () => {
    const frame = encodeRequest(7, {
      file: "/bin/echo",
      argv: ["echo", "a b"],
      env: { A: "1" },
      cwd: "/tmp",
      ids: { uid: 1000, gid: 1001 },
      stdin: true,
    });
    assert.equal(frame.readUInt32LE(0), frame.length - 4);
    assert.deepEqual(
      [4, 8, 12, 16, 20, 24].map((o) => frame.readUInt32LE(o)),
      [7, 3, 1000, 1001, 2, 1],
    );
    assert.equal(frame.subarray(28).toString(), "/bin/echo\0/tmp\0echo\0a b\0A=1\0");
    const plain = encodeRequest(8, { file: "/bin/true", argv: ["true"], env: {}, cwd: "/", stdin: false });
    assert.equal(plain.readUInt32LE(8), 0, "no flags: stdin from /dev/null, the agent's ids");
  });

  test("wait statuses: an exit code, or the signal that ended the process", () => {
    assert.deepEqual(decodeWaitStatus(0), { code: 0, signal: null });
    assert.deepEqual(decodeWaitStatus(3 << 8), { code: 3, signal: null });
    assert.deepEqual(decodeWaitStatus(9), { code: null, signal: "SIGKILL" });
    assert.deepEqual(decodeWaitStatus(15 | 0x80), { code: null, signal: "SIGTERM" }, "with a core dump");
  });
});
