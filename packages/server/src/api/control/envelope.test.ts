import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { argList, argText, encodeEnvelope, MAX_ARGS, parseText, readArgs } from "./envelope.js";

describe("control envelope", () => {
  it("reads the JS client's prefixed op.start, its args as strings and lists", () => {
    const p = parseText(
      'control:{"type":"op.start","op":"exec","args":{"cmd":["sh","-c","echo hi"],"tty":"true","rows":24,"stdin":false}}',
    );
    assert.deepEqual(p, {
      kind: "envelope",
      framing: "prefixed",
      envelope: {
        type: "op.start",
        op: "exec",
        args: { cmd: ["sh", "-c", "echo hi"], tty: "true", rows: "24", stdin: "false" },
      },
    });
  });

  it("reads the Go client's plain op.start with URL-encoded args, and its plain release", () => {
    const p = parseText('{"type":"op.start","op":"fs.read","args":"path=a%20b&workingDir=%2Fhome%2Funit&x=1&x=2"}');
    assert.deepEqual(p, {
      kind: "envelope",
      framing: "plain",
      envelope: { type: "op.start", op: "fs.read", args: { path: "a b", workingDir: "/home/unit", x: ["1", "2"] } },
    });
    assert.deepEqual(parseText('{"type":"release"}'), {
      kind: "envelope",
      framing: "plain",
      envelope: { type: "release", args: {} },
    });
  });

  it("reads the Go client's proxy start as an op.start", () => {
    const p = parseText(
      '{"type":"start","operation":"proxy","params":{"host":"localhost","port":8080,"keep_alive":true}}',
    );
    assert.deepEqual(p, {
      kind: "envelope",
      framing: "plain",
      envelope: { type: "op.start", op: "proxy", args: { host: "localhost", port: "8080", keep_alive: "true" } },
    });
  });

  it("leaves other text to the op: resize, signal, non-JSON", () => {
    assert.deepEqual(parseText('{"type":"resize","cols":80,"rows":24}'), { kind: "data" });
    assert.deepEqual(parseText("ls -l\r"), { kind: "data" });
    assert.deepEqual(parseText("{not json"), { kind: "data" });
  });

  it("names the problem of a malformed envelope", () => {
    const problem = (t: string) => {
      const p = parseText(t);
      assert.equal(p.kind, "invalid", t);
      return p.kind === "invalid" ? p.problem : "";
    };
    assert.match(problem("control:nope"), /not JSON/);
    assert.match(problem("control:[1]"), /JSON object/);
    assert.match(problem('control:{"op":"exec"}'), /^type: is required/);
    assert.match(problem('control:{"type":"op.start","op":5}'), /^op: must be/);
    assert.match(problem('control:{"type":"op.start","op":"exec","args":[1]}'), /^args: must be an object/);
    assert.match(problem('control:{"type":"op.start","op":"exec","args":{"a":{"b":1}}}'), /^args\.a: must be/);
    assert.match(problem('control:{"type":"op.start","op":"exec","args":{"a":[null]}}'), /^args\.a: a list/);
    const many = Object.fromEntries(Array.from({ length: MAX_ARGS + 1 }, (_, i) => [`k${i}`, "v"]));
    assert.match(problem(`control:${JSON.stringify({ type: "op.start", op: "x", args: many })}`), /at most 64/);
    assert.match(problem('{"type":"start","operation":""}'), /^operation: must be/);
  });

  it("encodes answers in the framing asked", () => {
    assert.equal(
      encodeEnvelope("prefixed", "op.complete", { exitCode: 3 }),
      'control:{"type":"op.complete","args":{"exitCode":3}}',
    );
    assert.equal(encodeEnvelope("plain", "op.complete"), '{"type":"op.complete"}');
  });

  it("reads one arg as text or as a list", () => {
    const args = { a: "1", b: ["x", "y"] };
    assert.equal(argText(args, "a"), "1");
    assert.equal(argText(args, "b"), "y");
    assert.deepEqual(argList(args, "a"), ["1"]);
    assert.equal(argList(args, "c"), undefined);
  });

  it("never throws, whatever the text (property)", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json().map((j) => `control:${j}`),
          fc.json(),
        ),
        (t) => {
          const p = parseText(t);
          assert.ok(["envelope", "data", "invalid"].includes(p.kind));
          if (p.kind === "envelope")
            for (const v of Object.values(p.envelope.args)) assert.ok(typeof v === "string" || Array.isArray(v));
        },
      ),
      { numRuns: 2000 },
    );
    fc.assert(fc.property(fc.anything(), (v) => void readArgs(v)));
  });
});
