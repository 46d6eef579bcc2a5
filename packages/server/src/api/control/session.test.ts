import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import fc from "fast-check";
import { ControlSession, type ControlTransport, type OpContext, type OpStarter } from "./session.js";

/** A transport that records what the session sends. */
function fakeTransport() {
  const sent: Array<string | Buffer> = [];
  let paused = 0;
  const closes: Array<[number, string]> = [];
  const t: ControlTransport = {
    send: (d) => void sent.push(d),
    backlogged: () => false,
    drained: () => Promise.resolve(),
    pauseInput: () => void paused++,
    resumeInput: () => void paused--,
    close: (code, reason) => void closes.push([code, reason]),
  };
  return { t, sent, closes, paused: () => paused, texts: () => sent.filter((s): s is string => typeof s === "string") };
}

/** An op that echoes data frames and completes on the text "done"; records its context. */
function echoOp(seen: OpContext[]): OpStarter {
  return (ctx) => {
    seen.push(ctx);
    return {
      data: (f) => ctx.send(f),
      text: (t) => (t === "done" ? ctx.complete({ exitCode: 0 }) : ctx.send(`echo:${t}`)),
    };
  };
}

const start = (op: string, args = {}) => `control:${JSON.stringify({ type: "op.start", op, args })}`;
const envelopes = (texts: string[]) =>
  texts
    .filter((t) => t.startsWith("control:") || t.startsWith('{"type":"op.'))
    .map((t) => JSON.parse(t.replace(/^control:/, "")));

describe("control session", () => {
  it("runs ops one after another on one connection, answering in their framing", () => {
    const f = fakeTransport();
    const seen: OpContext[] = [];
    const s = new ControlSession(f.t, new Map([["echo", echoOp(seen)]]));
    s.text(start("echo", { a: "1" }));
    assert.equal(s.busy, true);
    s.binary(Buffer.from("xyz"));
    s.text("hello");
    s.text("done");
    assert.equal(s.busy, false);
    assert.ok(seen[0]?.signal.aborted, "an ended op's signal is aborted");
    s.text('{"type":"op.start","op":"echo","args":"b=2"}');
    s.text("done");
    assert.deepEqual(
      seen.map((c) => [c.framing, c.args]),
      [
        ["prefixed", { a: "1" }],
        ["plain", { b: "2" }],
      ],
    );
    assert.deepEqual(f.sent, [
      Buffer.from("xyz"),
      "echo:hello",
      'control:{"type":"op.complete","args":{"exitCode":0}}',
      '{"type":"op.complete","args":{"exitCode":0}}',
    ]);
  });

  it("ends an op quietly (end) or by closing the connection (closeConnection), and is idle after", () => {
    const f = fakeTransport();
    const seen: OpContext[] = [];
    const s = new ControlSession(f.t, new Map([["echo", echoOp(seen)]]));
    s.text(start("echo"));
    seen[0]?.end();
    assert.equal(s.busy, false);
    assert.ok(seen[0]?.signal.aborted);
    assert.deepEqual(f.sent, [], "nothing is sent for a quiet end");
    s.text(start("echo"));
    seen[1]?.closeConnection(1000, "the target closed the connection");
    assert.equal(s.busy, false);
    assert.deepEqual(f.closes, [[1000, "the target closed the connection"]]);
    // Calls after the op's end are no-ops.
    seen[1]?.closeConnection(1011, "late");
    seen[1]?.send("late");
    assert.equal(f.closes.length, 1);
    assert.deepEqual(f.sent, []);
  });

  it("answers an unknown or missing op with op.error naming it, and stays usable", () => {
    const f = fakeTransport();
    const s = new ControlSession(f.t, new Map([["echo", echoOp([])]]));
    s.text(start("nope"));
    s.text('control:{"type":"op.start"}');
    const [a, b] = envelopes(f.texts());
    assert.equal(a.type, "op.error");
    assert.equal(a.args.code, ErrorCode.ControlUnknownOp);
    assert.match(a.args.error, /unknown operation 'nope' \(one of echo\)/);
    assert.match(b.args.error, /^op: is required/);
    s.text(start("echo"));
    assert.equal(s.busy, true);
  });

  it("ends a running op with op.error on a protocol violation (op.start while busy, bad envelope)", () => {
    for (const bad of [start("echo"), "control:{", 'control:{"type":"weird"}']) {
      const f = fakeTransport();
      const seen: OpContext[] = [];
      const s = new ControlSession(f.t, new Map([["echo", echoOp(seen)]]));
      s.text(start("echo"));
      s.text(bad);
      assert.equal(s.busy, false, bad);
      assert.ok(seen[0]?.signal.aborted);
      const [e] = envelopes(f.texts());
      assert.equal(e.type, "op.error");
      assert.equal(e.args.code, ErrorCode.ControlProtocol);
      assert.equal(e.args.status, 400);
    }
  });

  it("refuses data and garbage while idle with op.error, without a throw", () => {
    const f = fakeTransport();
    const s = new ControlSession(f.t, new Map());
    s.binary(Buffer.from([1, 2, 3]));
    s.text("garbage");
    const errs = envelopes(f.texts());
    assert.equal(errs.length, 2);
    assert.match(errs[0].args.error, /no operation running/);
    assert.match(errs[1].args.error, /expected an envelope/);
  });

  it("release stops the op silently; late sends of the old op are dropped", () => {
    const f = fakeTransport();
    const seen: OpContext[] = [];
    const s = new ControlSession(f.t, new Map([["echo", echoOp(seen)]]));
    s.text(start("echo"));
    seen[0]?.pauseInput();
    assert.equal(f.paused(), 1);
    s.text('{"type":"release"}');
    assert.equal(f.paused(), 0, "the op's pause ends with it");
    assert.equal(s.busy, false);
    seen[0]?.send("late");
    seen[0]?.complete();
    seen[0]?.fail({ error: "x", code: "y" });
    assert.deepEqual(f.sent, []);
    s.text(start("echo"));
    s.text("done");
    assert.equal(envelopes(f.texts())[0].type, "op.complete");
  });

  it("a throwing op fails with an internal error; the fault is reported", () => {
    const f = fakeTransport();
    const faults: unknown[] = [];
    const boom: OpStarter = () => {
      throw new Error("bug");
    };
    const s = new ControlSession(f.t, new Map([["boom", boom]]), (e) => faults.push(e));
    s.text(start("boom"));
    assert.equal(s.busy, false);
    assert.equal(faults.length, 1);
    const [e] = envelopes(f.texts());
    assert.equal(e.args.code, ErrorCode.Internal);
    assert.doesNotMatch(e.args.error, /bug/);
  });

  it("close stops the running op and ignores everything after", () => {
    const f = fakeTransport();
    const seen: OpContext[] = [];
    const s = new ControlSession(f.t, new Map([["echo", echoOp(seen)]]));
    s.text(start("echo"));
    s.close();
    assert.ok(seen[0]?.signal.aborted);
    s.text(start("echo"));
    s.binary(Buffer.from("x"));
    assert.deepEqual(f.sent, []);
  });

  it("any sequence of frames leaves it consistent (property)", () => {
    const frame = fc.oneof(
      fc.constant(start("echo")),
      fc.constant("done"),
      fc.constant('{"type":"release"}'),
      fc.constant("control:{bad"),
      fc.string(),
      fc.uint8Array({ maxLength: 8 }).map((b) => Buffer.from(b)),
    );
    fc.assert(
      fc.property(fc.array(frame, { maxLength: 30 }), (frames) => {
        const f = fakeTransport();
        const seen: OpContext[] = [];
        const s = new ControlSession(f.t, new Map([["echo", echoOp(seen)]]));
        for (const fr of frames) typeof fr === "string" ? s.text(fr) : s.binary(fr);
        // At most the last op runs; every earlier one has ended; pauses are balanced.
        assert.ok(seen.slice(0, -1).every((c) => c.signal.aborted));
        assert.equal(s.busy, seen.length > 0 && !seen.at(-1)?.signal.aborted);
        assert.ok(f.paused() === 0);
      }),
      { numRuns: 500 },
    );
  });
});
