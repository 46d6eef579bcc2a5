import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { clientFrame, execTarget, exitOf, exitOfClose, stdinFraming } from "./exec-op.js";
import { readRange } from "./fs-ops.js";

describe("control ops, pure parts", () => {
  it("translates the clients' exec frames into the agent's", () => {
    // The Go client: raw stdin, EOF as the one byte 4.
    assert.deepEqual(clientFrame(Buffer.from("abc"), false), { data: Buffer.from([0, 97, 98, 99]), binary: true });
    assert.deepEqual(clientFrame(Buffer.from([4]), false), { data: Buffer.from([4]), binary: true });
    // A TTY's bytes pass as they are.
    assert.deepEqual(clientFrame(Buffer.from("ls\r"), true), { data: Buffer.from("ls\r"), binary: true });
    // The JS client's resize and signal come as binary JSON: text for the agent.
    const resize = JSON.stringify({ type: "resize", cols: 90, rows: 20 });
    assert.deepEqual(clientFrame(Buffer.from(resize), true), { data: resize, binary: false });
    const sig = JSON.stringify({ type: "signal", signal: "KILL" });
    assert.deepEqual(clientFrame(Buffer.from(sig), false), { data: sig, binary: false });
    // JSON that is no control message is stdin.
    assert.equal(clientFrame(Buffer.from('{"a":1}'), false).binary, true);
    // The JS client: stdin with its stream id, passed as it is; its binary JSON is still a message.
    assert.deepEqual(clientFrame(Buffer.from([0, 97]), false, "stream-id"), {
      data: Buffer.from([0, 97]),
      binary: true,
    });
    assert.deepEqual(clientFrame(Buffer.from([4]), false, "stream-id"), { data: Buffer.from([4]), binary: true });
    assert.deepEqual(clientFrame(Buffer.from(sig), false, "stream-id"), { data: sig, binary: false });
  });

  it("tells the clients' stdin framing by their op.start (Go names path or id; JS neither)", () => {
    assert.equal(stdinFraming({ cmd: ["cat"], path: "cat", stdin: "true" }), "raw");
    assert.equal(stdinFraming({ id: "12" }), "raw");
    assert.equal(stdinFraming({ cmd: ["cat"], stdin: "true" }), "stream-id");
  });

  it("reads exits from frames and close codes", () => {
    assert.equal(exitOf(Buffer.from([3, 7]), true), 7);
    assert.equal(exitOf(Buffer.from([1, 7]), true), undefined);
    assert.equal(exitOf(Buffer.from('{"type":"exit","exit_code":2}'), false), 2);
    assert.equal(exitOf(Buffer.from('{"type":"session_info"}'), false), undefined);
    assert.equal(exitOfClose(1000), 0);
    assert.equal(exitOfClose(4005), 5);
    assert.equal(exitOfClose(1006), undefined);
  });

  it("checks exec args as /exec checks its query", () => {
    const t = execTarget({
      cmd: ["sh", "-c", "echo hi"],
      tty: "true",
      rows: "30",
      cols: "100",
      stdin: "true",
      dir: "/tmp",
    });
    assert.equal(t.tty, true);
    assert.match(t.path, /^\/exec\?cmd=sh&cmd=-c&cmd=echo\+hi/);
    assert.match(t.path, /rows=30/);
    assert.equal(execTarget({ id: "12" }).path, "/exec/12");
    const problem = (args: Record<string, string | string[]>) => {
      try {
        execTarget(args);
      } catch (err) {
        return (err as Error).message;
      }
      return "";
    };
    assert.match(problem({}), /cmd: is required/);
    assert.match(problem({ cmd: [""] }), /cmd: the first value/);
    assert.match(problem({ cmd: "ls", env: "NOPE" }), /env: 'NOPE' is not KEY=VALUE/);
    assert.match(problem({ cmd: "ls", rows: "many" }), /rows/);
    assert.match(problem({ cmd: "ls", bogus: "1" }), /bogus: is not a known field/);
    assert.match(problem({ id: "../x" }), /id: must be a session id/);
  });

  it("reads a read's byte range", () => {
    assert.deepEqual(readRange({}), { start: 0, end: undefined });
    assert.deepEqual(readRange({ start: "2", end: "5" }), { start: 2, end: 5 });
    assert.deepEqual(readRange({ start: "2", end: "0" }), { start: 2, end: undefined });
    assert.throws(() => readRange({ start: "-1" }), /start: must be a byte offset/);
    assert.throws(() => readRange({ start: "5", end: "2" }), /end: must not be before start/);
  });
});
