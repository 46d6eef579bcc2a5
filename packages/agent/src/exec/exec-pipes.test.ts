// End-to-end tests of non-TTY exec sessions against the real bundled agent (docs/ARCHITECTURE.md section 10 frames).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, closeSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  ExecClient,
  httpJson,
  query,
  type RunningAgent,
  run,
  startAgent,
  upgradeRejection,
} from "../testing/harness.js";

const node = process.execPath;

// The same suite for each way the agent starts a process (exec/spawn.ts): ums-spawn, and node's spawn.
for (const spawner of ["native", "node"] as const)
  describe(`agent exec over pipes (${spawner})`, () => {
    let agent: RunningAgent;
    before(async () => {
      agent = await startAgent({ UMS_AGENT_PING_INTERVAL: "200ms", UMS_AGENT_SPAWNER: spawner });
    });
    after(async () => {
      await agent?.stop();
    });

    test("health reports pid, version and session counts", async () => {
      const r = await httpJson(agent, "GET", "/health");
      assert.equal(r.status, 200);
      const body = r.body as {
        ok: boolean;
        pid: number;
        version: string;
        sessions: { total: number; attached: number };
      };
      assert.equal(body.ok, true);
      assert.equal(body.pid, agent.proc.pid);
      assert.match(body.version, /^\d+\.\d+\.\d+/);
      assert.equal(typeof body.sessions.total, "number");
      assert.equal(typeof body.sessions.attached, "number");
    });

    test("session_info comes first and describes the session", async () => {
      const r = await run(agent, { cmd: ["sh", "-c", "exit 0"] });
      const first = r.client.messages[0];
      assert.ok(first && !first.binary, "first message is text");
      assert.equal(r.info.type, "session_info");
      assert.equal(typeof r.info.session_id, "number");
      assert.equal(r.info.command, "sh -c exit 0");
      assert.equal(r.info.tty, false);
      assert.equal(r.info.is_owner, true);
      assert.equal(r.info.cols, 80);
      assert.equal(r.info.rows, 24);
      assert.ok(!Number.isNaN(Date.parse(String(r.info.created))));
    });

    test("exit codes: 0 closes with 1000, 3 with 4003, a signal gives 128+n", async () => {
      const ok = await run(agent, { cmd: ["sh", "-c", "exit 0"] });
      assert.equal(ok.exitCode, 0);
      assert.equal(ok.closeCode, 1000);
      const three = await run(agent, { cmd: ["sh", "-c", "exit 3"] });
      assert.equal(three.exitCode, 3);
      assert.equal(three.closeCode, 4003);
      const killed = await run(agent, { cmd: ["sh", "-c", "kill -TERM $$"] });
      assert.equal(killed.exitCode, 143);
      assert.equal(killed.closeCode, 4143);
      const exitFrame = killed.client.messages.find((m) => m.binary && m.data[0] === 3);
      assert.equal(exitFrame?.data.length, 2, "the exit frame is two bytes");
    });

    test("stdout and stderr stay separate and in order", async () => {
      const r = await run(agent, { cmd: ["sh", "-c", "echo out1; echo err1 >&2; echo out2; echo err2 >&2"] });
      assert.equal(r.stdout.toString(), "out1\nout2\n");
      assert.equal(r.stderr.toString(), "err1\nerr2\n");
      assert.equal(r.exitCode, 0);
      // the exit frame is the last binary frame
      const binaries = r.client.messages.filter((m) => m.binary);
      assert.equal(binaries[binaries.length - 1]?.data[0], 3);
    });

    test("stdin data and EOF reach the process", async () => {
      const r = await run(agent, { cmd: ["cat"], stdin: true }, ["hello ", Buffer.from("world\n")]);
      assert.equal(r.stdout.toString(), "hello world\n");
      assert.equal(r.exitCode, 0);
    });

    test("without stdin=true a non-TTY process reads /dev/null", async () => {
      const r = await run(agent, { cmd: ["sh", "-c", "cat; echo done"] });
      assert.equal(r.stdout.toString(), "done\n");
    });

    test("large stdin is written with backpressure", async () => {
      const chunk = Buffer.alloc(1 << 20, 0x61);
      const r = await run(
        agent,
        { cmd: ["sh", "-c", "wc -c"], stdin: true },
        Array.from({ length: 8 }, () => chunk),
      );
      assert.equal(r.stdout.toString().trim(), String(8 << 20));
    });

    test("env, dir and the session's user environment", async () => {
      const sub = join(agent.home, "work dir");
      mkdirSync(sub, { recursive: true });
      const r = await run(agent, {
        cmd: [
          "sh",
          "-c",
          // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion
          'echo "$FOO|$EMPTY|$(pwd)|$HOME|$USER|$LOGNAME|$SHELL|$PATH|${TERM-unset}|${UMS_AGENT_SOCKET-unset}"',
        ],
        env: ["FOO=bar=baz", "EMPTY="],
        dir: sub,
      });
      const [foo, empty, pwd, home, user, logname, shell, path, term, leaked] = r.stdout.toString().trim().split("|");
      assert.equal(foo, "bar=baz");
      assert.equal(empty, "");
      assert.equal(pwd, sub);
      assert.equal(home, agent.home);
      assert.ok(user && user === logname);
      assert.equal(shell, "/bin/bash");
      assert.equal(path, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
      assert.equal(term, "unset");
      assert.equal(leaked, "unset", "the agent's own environment does not leak into sessions");

      const dflt = await run(agent, { cmd: ["pwd"] });
      assert.equal(dflt.stdout.toString(), `${agent.home}\n`, "sessions start in HOME by default");
      const relative = await run(agent, { cmd: ["pwd"], dir: "work dir" });
      assert.equal(relative.stdout.toString(), `${sub}\n`, "a relative dir is taken from HOME");
    });

    test("path runs another executable with the given argv", async () => {
      const r = await run(agent, { cmd: ["custom-name", "-c", 'echo "$0"'], path: "/bin/sh" });
      assert.equal(r.stdout.toString(), "custom-name\n");
    });

    test("20 MB of output arrives complete and in order", async () => {
      const expected = spawnSync("seq", ["1", "2700000"], { maxBuffer: 64 << 20 }).stdout;
      assert.ok(expected.length > 20_000_000);
      const r = await run(agent, { cmd: ["seq", "1", "2700000"] });
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout.length, expected.length);
      assert.ok(r.stdout.equals(expected));
    });

    test("output is binary-safe (all 256 byte values)", async () => {
      const script =
        "const b=Buffer.alloc(1024);for(let i=0;i<1024;i++)b[i]=i%256;process.stdout.write(b);process.stderr.write(b.subarray(0,256))";
      const r = await run(agent, { cmd: ["node", "-e", script], path: node });
      const expected = Buffer.from(Array.from({ length: 1024 }, (_, i) => i % 256));
      assert.ok(r.stdout.equals(expected));
      assert.ok(r.stderr.equals(expected.subarray(0, 256)));
    });

    test("concurrent sessions run independently", async () => {
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          run(agent, { cmd: ["sh", "-c", 'sleep 0.3; echo "n=$N"; exit $N'], env: [`N=${i + 1}`] }),
        ),
      );
      const ids = new Set(results.map((r) => r.info.session_id));
      assert.equal(ids.size, 6);
      results.forEach((r, i) => {
        assert.equal(r.stdout.toString(), `n=${i + 1}\n`);
        assert.equal(r.exitCode, i + 1);
      });
    });

    test("spawn failures: 127 for a missing command or dir, 126 for a non-executable file", async () => {
      const missing = await run(agent, { cmd: ["no-such-command-ums"] });
      assert.equal(missing.exitCode, 127);
      assert.equal(missing.closeCode, 4127);
      assert.match(missing.stderr.toString(), /no-such-command-ums: command not found/);

      const missingPath = await run(agent, { cmd: ["/nonexistent/tool"] });
      assert.equal(missingPath.exitCode, 127);
      assert.match(missingPath.stderr.toString(), /No such file or directory/);

      const file = join(agent.home, "not-executable.sh");
      writeFileSync(file, "echo hi\n");
      chmodSync(file, 0o644);
      const noexec = await run(agent, { cmd: [file] });
      assert.equal(noexec.exitCode, 126);
      assert.match(noexec.stderr.toString(), /Permission denied/);

      const dir = await run(agent, { cmd: ["pwd"], dir: "/nonexistent-ums-dir" });
      assert.equal(dir.exitCode, 127);
      assert.match(dir.stderr.toString(), /cannot change directory to \/nonexistent-ums-dir/);

      // the agent is still fine
      const ok = await run(agent, { cmd: ["true"] });
      assert.equal(ok.exitCode, 0);
    });

    test("a failed exec after the checks (a file open for writing): 126 and why", async () => {
      const file = join(agent.home, "being-written");
      writeFileSync(file, "#!/bin/sh\necho hi\n");
      chmodSync(file, 0o755);
      const fd = openSync(file, "a");
      try {
        const busy = await run(agent, { cmd: [file] });
        assert.equal(busy.exitCode, 126);
        assert.equal(busy.stderr.toString(), `ums: cannot start ${file}: text file is busy (ETXTBSY)\n`);
      } finally {
        closeSync(fd);
      }
      assert.equal((await run(agent, { cmd: [file] })).stdout.toString(), "hi\n");
    });

    test("invalid queries are refused with 400 before the upgrade", async () => {
      const noCmd = await upgradeRejection(agent, "/exec?tty=true");
      assert.equal(noCmd.status, 400);
      assert.equal((noCmd.body as { code: string }).code, "UMS_VALIDATION");
      assert.match((noCmd.body as { errors: string[] }).errors.join(), /cmd is required/);
      for (const q of [
        { cmd: "ls", cols: "abc" },
        { cmd: "ls", rows: "0" },
        { cmd: "ls", env: "NOEQUALS" },
        { cmd: "ls", tty: "maybe" },
        { cmd: "ls", max_run_after_disconnect: "soon" },
        { cmd: "ls", user: "no-such-user-ums" },
      ]) {
        const r = await upgradeRejection(agent, `/exec?${query(q)}`);
        assert.equal(r.status, 400, JSON.stringify(q));
        assert.ok(Array.isArray((r.body as { errors: string[] }).errors));
      }
    });

    test("unknown routes and sessions answer 404 JSON", async () => {
      const r = await httpJson(agent, "GET", "/nope");
      assert.equal(r.status, 404);
      assert.equal(typeof (r.body as { error: string }).error, "string");
      const ws = await upgradeRejection(agent, "/exec/99999");
      assert.equal(ws.status, 404);
      assert.equal((ws.body as { code: string }).code, "UMS_SESSION_NOT_FOUND");
      const other = await upgradeRejection(agent, "/somewhere");
      assert.equal(other.status, 404);
    });

    test("keepalive ping text frames are sent while a session runs", async () => {
      const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "0.7"] })}`);
      await c.closed;
      const pings = c.texts().filter((m) => m.type === "ping");
      assert.ok(pings.length >= 2, `expected pings, got ${pings.length}`);
      assert.equal(c.exitFrame(), 0);
    });

    test("a signal control message reaches the process group in non-TTY mode", async () => {
      const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "30"] })}`);
      await c.waitText("session_info");
      c.ws.send(JSON.stringify({ type: "signal", signal: "INT" }));
      await c.closed;
      assert.equal(c.exitFrame(), 130);
    });
  });
