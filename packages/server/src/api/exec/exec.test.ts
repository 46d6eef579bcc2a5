import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { execHttp } from "../../testing/exec-client.js";
import { startWithUnit, type TestServer } from "../../testing/server.js";

/** Spec 4.3 / docs/ARCHITECTURE.md section 10: exec over HTTP against a real unit. */
describe("exec over HTTP", () => {
  let s: TestServer;
  let token: string;
  const run = (cmd: string[], opts = {}) => execHttp(s.url, token, "ex", cmd, opts);
  before(async () => {
    ({ s, token } = await startWithUnit("exec", "ex"));
  });
  after(() => s?.close());

  it("boots a cold unit on first use and runs as the unit user in its home", async () => {
    const r = await run(["sh", "-c", "id -un; id -u; pwd; hostname"]);
    assert.equal(r.status, 200);
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.toString(), "unit\n1000\n/home/unit\nex\n");
    assert.equal((await s.api("GET", "/v1/units/ex", { token })).body.status, "running");
  });

  it("writes each frame as its own chunk and ends with the two-byte exit frame", async () => {
    const r = await run(["sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert.equal(r.exitCode, 7);
    assert.equal(r.stdout.toString(), "out\n");
    assert.equal(r.stderr.toString(), "err\n");
    for (const c of r.chunks) assert.ok([1, 2, 3].includes(c[0] ?? -1), `chunk starts with a stream id: ${c[0]}`);
    assert.deepEqual([...(r.chunks.at(-1) ?? [])], [3, 7]);
  });

  it("reports exit codes, including death by signal as 128+n", async () => {
    assert.equal((await run(["true"])).exitCode, 0);
    assert.equal((await run(["false"])).exitCode, 1);
    assert.equal((await run(["sh", "-c", "kill -9 $$"])).exitCode, 137);
  });

  it("passes stdin only when asked, env, dir and path", async () => {
    const r = await run(["cat"], { stdin: "hello\nworld" });
    assert.equal(r.stdout.toString(), "hello\nworld");
    const noStdin = await run(["cat"]);
    assert.equal(noStdin.exitCode, 0);
    assert.equal(noStdin.stdout.length, 0);
    const env = await run(["sh", "-c", 'echo "$A|$B"'], { env: ["A=1", "B=x=y"] });
    assert.equal(env.stdout.toString(), "1|x=y\n");
    const dir = await run(["pwd"], { dir: "/tmp" });
    assert.equal(dir.stdout.toString(), "/tmp\n");
    const path = await run(["ignored-name", "-c", "echo $0"], { path: "/bin/sh" });
    assert.equal(path.exitCode, 0);
  });

  it("runs as root only when asked", async () => {
    assert.equal((await run(["id", "-u"], { user: "root" })).stdout.toString(), "0\n");
    assert.equal((await run(["sudo", "-n", "id", "-u"])).stdout.toString(), "0\n", "passwordless sudo works");
  });

  it("streams large output completely and binary-safe", async () => {
    const big = await run(["sh", "-c", "head -c 20000000 /dev/zero"]);
    assert.equal(big.exitCode, 0);
    assert.equal(big.stdout.length, 20_000_000);
    const all = await run(["python3", "-c", "import sys; sys.stdout.buffer.write(bytes(range(256))*4)"]);
    assert.deepEqual(
      [...all.stdout],
      [...Buffer.concat(Array.from({ length: 4 }, () => Buffer.from([...Array(256).keys()])))],
    );
    const bin = Buffer.from([0, 1, 2, 3, 255, 254, 10, 13, 0]);
    assert.deepEqual([...(await run(["cat"], { stdin: bin })).stdout], [...bin]);
  });

  it("runs concurrent sessions independently", async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => run(["sh", "-c", `sleep 0.$((RANDOM % 5)); echo ${i}; exit ${i}`])),
    );
    results.forEach((r, i) => {
      assert.equal(r.exitCode, i);
      assert.equal(r.stdout.toString(), `${i}\n`);
    });
  });

  it("answers a command that cannot run with 127 and a message", async () => {
    const r = await run(["/no/such/program"]);
    assert.equal(r.exitCode, 127);
    assert.match(r.stderr.toString(), /no\/such\/program/);
  });

  it("goes on after root in the unit empties /run, the agent's helper's socket with it", async () => {
    /** Until exec's processes start through a ums-spawn (the parent of the exec's shell). */
    const throughHelper = async (what: string) => {
      const parent = async () => (await run(["sh", "-c", "cat /proc/$PPID/comm"])).stdout.toString().trim();
      for (let i = 0; (await parent()) !== "ums-spawn"; i++) {
        assert.ok(i < 50, `${what} within 5 s`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    await throughHelper("exec's processes did not start through ums-spawn");
    const rm = await run(["sh", "-c", "rm -rf /run/* /run/.[!.]*; ls -A /run | wc -l"], { user: "root" });
    assert.equal(rm.stdout.toString(), "0\n", rm.stderr.toString());
    // Before: "cannot start /usr/bin/sh: no such file or directory (ENOENT)", for every exec until a restart.
    const after = await run(["sh", "-c", "echo after"]);
    assert.equal(after.exitCode, 0, after.stderr.toString());
    assert.equal(after.stdout.toString(), "after\n");
    // The unit user's filesystem process (its first start: none ran in this unit before) is made there too.
    const read = await fetch(`${s.url}/v1/units/ex/fs/read?path=/etc/hostname&workingDir=/`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(read.status, 200, await read.clone().text());
    assert.equal(await read.text(), "ex\n");
    await throughHelper("no new ums-spawn");
  });

  it("a client that goes away ends its command", async () => {
    const url = new URL(
      `${s.url}/v1/units/ex/exec?cmd=sh&cmd=-c&cmd=${encodeURIComponent("echo started; exec sleep 300.4321")}`,
    );
    const req = request(url, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    req.on("error", () => {});
    await new Promise<void>((resolve) => {
      req.on("response", (res) => res.once("data", () => resolve()));
      req.end();
    });
    const count = async () =>
      (await run(["sh", "-c", "ps -eo args= | grep -c '^sleep 300.4321$' || true"])).stdout.toString().trim();
    try {
      // Its first output comes before its shell has become the sleep (`exec`): wait for the sleep.
      for (let i = 0; (await count()) !== "1"; i++) {
        assert.ok(i < 50, "the command's sleep did not start within 5 s");
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      // Also when that fails: the connection would otherwise hold the suite until the sleep ends.
      req.destroy();
    }
    for (let i = 0; (await count()) !== "0"; i++) {
      assert.ok(i < 50, "the command still runs 5 s after its client went away");
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it("answers a silent command's head while it runs; a short one's whole answer comes in one piece", async () => {
    // The head waits for the first frame (to leave in the same write), but not for the process's end.
    const url = new URL(`${s.url}/v1/units/ex/exec?cmd=sleep&cmd=3`);
    const req = request(url, { method: "POST", headers: { authorization: `Bearer ${token}` } });
    req.on("error", () => {});
    const started = performance.now();
    try {
      const status = await new Promise<number | undefined>((resolve, reject) => {
        req.on("response", (res) => resolve(res.statusCode));
        req.on("error", reject);
        req.end();
      });
      assert.equal(status, 200);
      const ms = performance.now() - started;
      assert.ok(ms < 2000, `the head came ${ms.toFixed(0)} ms after the request, not with the exit 3 s later`);
    } finally {
      req.destroy();
    }
    const r = await run(["true"]);
    assert.equal(r.exitCode, 0);
    assert.deepEqual(
      r.chunks.map((c) => [...c]),
      [[3, 0]],
    );
  });

  it("validates the query before touching the unit", async () => {
    const q = (qs: string) => s.api("POST", `/v1/units/ex/exec?${qs}`, { token });
    assert.equal((await q("")).status, 400);
    const env = await q("cmd=true&env=NOEQUALS");
    assert.equal(env.status, 400);
    assert.match(env.body.errors[0], /^env: 'NOEQUALS' is not KEY=VALUE/);
    assert.equal((await q("cmd=true&stdin=maybe")).status, 400);
    assert.equal((await s.api("POST", "/v1/units/nope/exec?cmd=true", { token })).status, 404);
  });
});
