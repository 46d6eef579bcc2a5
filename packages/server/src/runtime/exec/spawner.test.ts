// Host commands from the helper process (spawner.ts): the same answers as a fork of this process,
// never a fork of it, and an error (not a hang) when the helper dies under a command.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CommandError, run, runFromHelper } from "./host-command.js";
import { Spawner } from "./spawner.js";

/** The same checks, direct and through the helper. */
async function answers(): Promise<void> {
  assert.deepEqual(await run("sh", ["-c", "echo out; echo err >&2"]), { stdout: "out\n", stderr: "err\n" });
  assert.equal((await run("cat", [], { input: "given\n" })).stdout, "given\n");
  assert.equal((await run("sh", ["-c", 'echo "$LC_ALL $X"'], { env: { X: "y" } })).stdout, "C y\n");
  await assert.rejects(run("sh", ["-c", "echo why >&2; exit 3"]), (err: unknown) => {
    assert.ok(err instanceof CommandError);
    assert.equal(err.exitCode, 3);
    assert.match(err.message, /sh -c .* failed \(exit 3\): why/);
    return true;
  });
  await assert.rejects(run("ums-no-such-command", []), (err: unknown) => {
    assert.ok(err instanceof CommandError);
    assert.match(err.message, /command not found/);
    return true;
  });
  await assert.rejects(run("sleep", ["5"], { timeoutMs: 100 }), (err: unknown) => {
    assert.ok(err instanceof CommandError);
    assert.equal(err.signal, "SIGTERM");
    return true;
  });
  // An argument execFile cannot pass is an error, as before.
  await assert.rejects(run("echo", ["a\0b"]), /null bytes|must be a string without null bytes/);
}

describe("host commands from a helper process (issue #16 parts 6, 7)", () => {
  it("answers as a fork of this process does: output, input, environment, exit codes, a missing command, timeouts", async () => {
    await answers();
    const release = runFromHelper();
    try {
      await answers();
    } finally {
      release();
    }
  });

  it("forks the command from the helper, not from this process, and stops the helper when released", async () => {
    const parent = async () => Number((await run("sh", ["-c", "echo $PPID"])).stdout.trim());
    assert.equal(await parent(), process.pid);
    const release = runFromHelper();
    const again = runFromHelper();
    let helper: number;
    try {
      helper = await parent();
      assert.notEqual(helper, process.pid);
      assert.equal(Number((await run("sh", ["-c", `ps -o ppid= -p ${helper}`])).stdout.trim()), process.pid);
      release();
      assert.equal(await parent(), helper, "another holder keeps it");
    } finally {
      release();
      again();
    }
    assert.equal(await parent(), process.pid, "released by all: direct again");
    for (let i = 0; i < 50 && alive(helper); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(alive(helper), false, "the helper is gone");
  });

  it("a helper that dies under a command answers it with an error; the next command starts a new one", async () => {
    const s = new Spawner();
    try {
      const req = (args: string[]) => ({
        command: "sh",
        args,
        env: process.env,
        timeoutMs: 10_000,
        maxBuffer: 1 << 20,
      });
      const first = await s.run(req(["-c", "echo $PPID"]));
      assert.ok(first.ok);
      const pid = s.pid;
      assert.ok(pid);
      const slow = s.run(req(["-c", "sleep 5"]));
      process.kill(pid, "SIGKILL");
      await assert.rejects(slow, /host command helper exited \(SIGKILL\)/);
      const next = await s.run(req(["-c", "echo $PPID"]));
      assert.ok(next.ok);
      assert.notEqual(s.pid, pid);
      assert.equal(next.stdout.trim(), String(s.pid));
    } finally {
      s.close();
    }
    await assert.rejects(
      s.run({ command: "true", args: [], env: process.env, timeoutMs: 1000, maxBuffer: 1 }),
      /closed/,
    );
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
