// End-to-end tests of TTY exec sessions (a real PTY from node-pty) against the real bundled agent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ExecClient, query, type RunningAgent, startAgent } from "../testing/harness.js";

describe("agent exec on a TTY", () => {
  let agent: RunningAgent;
  before(async () => {
    agent = await startAgent();
  });
  after(async () => {
    await agent?.stop();
  });

  test("stty size reports the initial size and follows a resize", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["bash", "-c", 'stty size; echo "term=$TERM"; read x; stty size'], tty: true, cols: 100, rows: 30 })}`,
    );
    const info = await c.waitText("session_info");
    assert.equal(info.tty, true);
    assert.equal(info.cols, 100);
    assert.equal(info.rows, 30);
    await c.waitRaw("30 100");
    await c.waitRaw("term=xterm-256color");
    c.ws.send(JSON.stringify({ type: "resize", cols: 132, rows: 43 }));
    c.ws.send(Buffer.from("\r"));
    await c.waitRaw("43 132");
    const code = await c.closed;
    assert.equal(code, 1000);
    const exit = c.texts().find((m) => m.type === "exit");
    assert.deepEqual(exit, { type: "exit", exit_code: 0 });
    // the exit message is the last message before the close
    const last = c.messages[c.messages.length - 1];
    assert.ok(last && !last.binary && JSON.parse(last.data.toString()).type === "exit");
  });

  test("default size is 80x24", async () => {
    const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["stty", "size"], tty: true })}`);
    await c.closed;
    assert.match(c.raw(), /24 80/);
  });

  test("Ctrl-C (0x03) interrupts sleep running in an interactive bash", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["bash", "--norc", "--noprofile", "-i"], tty: true })}`,
    );
    c.ws.send(Buffer.from("PS1='$ '\r"));
    c.ws.send(Buffer.from("sleep 100; echo after-sleep-$((6*7))\r"));
    await new Promise((r) => setTimeout(r, 400));
    const started = Date.now();
    c.ws.send(Buffer.from([0x03]));
    c.ws.send(Buffer.from("echo interrupted-$((6*7))\r"));
    await c.waitRaw("interrupted-42", 5000);
    assert.ok(Date.now() - started < 5000);
    assert.ok(!c.raw().includes("after-sleep-42"), "the rest of the interrupted line did not run");
    c.ws.send(Buffer.from("exit 7\r"));
    const code = await c.closed;
    assert.equal(code, 4007);
    assert.deepEqual(
      c.texts().find((m) => m.type === "exit"),
      { type: "exit", exit_code: 7 },
    );
  });

  test("a process killed by a signal closes with 4000+128+n", async () => {
    const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["bash", "-c", "kill -KILL $$"], tty: true })}`);
    const code = await c.closed;
    assert.equal(code, 4137);
    assert.deepEqual(
      c.texts().find((m) => m.type === "exit"),
      { type: "exit", exit_code: 137 },
    );
  });

  test("signal control messages reach the process group", async () => {
    const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "30"], tty: true })}`);
    await c.waitText("session_info");
    c.ws.send(JSON.stringify({ type: "signal", signal: "SIGTERM" }));
    const code = await c.closed;
    assert.equal(code, 4143);
  });

  test("a command that cannot start reports a message and 127", async () => {
    const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["no-such-command-ums"], tty: true })}`);
    const code = await c.closed;
    assert.equal(code, 4127);
    assert.match(c.raw(), /no-such-command-ums: command not found/);
  });

  test("binary input and output pass through the PTY unchanged (raw mode)", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["sh", "-c", "stty raw -echo; head -c 5 | od -An -tx1"], tty: true })}`,
    );
    await new Promise((r) => setTimeout(r, 300));
    c.ws.send(Buffer.from([0xff, 0x00, 0x80, 0x7f, 0x01]));
    await c.closed;
    assert.match(c.raw(), /ff 00 80 7f 01/);
  });
});
