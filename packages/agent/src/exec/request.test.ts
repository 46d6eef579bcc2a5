import assert from "node:assert/strict";
import { test } from "node:test";
import { parseExecQuery } from "./request.js";
import { OutputRing } from "./ring.js";

test("parseExecQuery applies the documented defaults", () => {
  const r = parseExecQuery(new URLSearchParams("cmd=ls&cmd=-l"));
  assert.ok(r.ok);
  assert.deepEqual(r.value, {
    argv: ["ls", "-l"],
    path: "ls",
    tty: false,
    stdin: false,
    cols: 80,
    rows: 24,
    env: [],
    dir: null,
    user: null,
    maxRunAfterDisconnectMs: 0,
    ports: true,
  });
  const t = parseExecQuery(
    new URLSearchParams(
      "cmd=bash&tty=true&cols=120&rows=40&env=A=1&env=B=x=y&dir=/tmp&max_run_after_disconnect=2m&path=/bin/bash",
    ),
  );
  assert.ok(t.ok);
  assert.equal(t.value.tty, true);
  assert.equal(t.value.stdin, true, "stdin defaults to true on a TTY");
  assert.equal(t.value.path, "/bin/bash");
  assert.deepEqual(t.value.env, [
    ["A", "1"],
    ["B", "x=y"],
  ]);
  assert.equal(t.value.maxRunAfterDisconnectMs, 120_000);
  const s = parseExecQuery(new URLSearchParams("cmd=cat&stdin=1&max_run_after_disconnect=30"));
  assert.ok(s.ok);
  assert.equal(s.value.stdin, true);
  assert.equal(s.value.maxRunAfterDisconnectMs, 30_000);
});

test("a TTY or detachable session outlives its clients until it exits unless max_run_after_disconnect says otherwise", () => {
  const at = (q: string) => {
    const r = parseExecQuery(new URLSearchParams(q));
    assert.ok(r.ok, q);
    return r.value.maxRunAfterDisconnectMs;
  };
  assert.equal(at("cmd=bash&tty=true"), Number.POSITIVE_INFINITY);
  assert.equal(at("cmd=bash&tty=true&detachable=true"), Number.POSITIVE_INFINITY);
  assert.equal(at("cmd=sleep&detachable=true"), Number.POSITIVE_INFINITY);
  assert.equal(at("cmd=sleep&detachable=false"), 0);
  assert.equal(at("cmd=bash&tty=true&max_run_after_disconnect=0"), 0);
  assert.equal(at("cmd=bash&tty=true&max_run_after_disconnect=5s"), 5000);
  const bad = parseExecQuery(new URLSearchParams("cmd=bash&detachable=maybe"));
  assert.ok(!bad.ok);
  assert.match(bad.errors.join(), /detachable/);
});

test("parseExecQuery reports every problem", () => {
  const r = parseExecQuery(new URLSearchParams("cols=0&rows=x&env=NOPE&tty=perhaps&max_run_after_disconnect=-1"));
  assert.ok(!r.ok);
  assert.equal(r.errors.length, 6);
});

test("OutputRing keeps the last bytes with their streams", () => {
  const ring = new OutputRing(10);
  ring.push(1, Buffer.from("abcdef"));
  ring.push(2, Buffer.from("ghij"));
  ring.push(1, Buffer.from("kl"));
  assert.equal(ring.bytes, 10);
  assert.deepEqual(
    ring.snapshot().map((c) => [c.stream, c.data.toString()]),
    [
      [1, "cdef"],
      [2, "ghij"],
      [1, "kl"],
    ],
  );
  ring.push(2, Buffer.from("0123456789ABC"));
  assert.deepEqual(
    ring.snapshot().map((c) => [c.stream, c.data.toString()]),
    [[2, "3456789ABC"]],
  );
});
