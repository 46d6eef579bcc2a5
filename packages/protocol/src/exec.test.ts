import assert from "node:assert/strict";
import { test } from "node:test";
import {
  closeCodeForExit,
  decodeFrame,
  encodeExitFrame,
  encodeFrame,
  FrameReader,
  frameLength,
  parseClientControl,
  StreamId,
} from "./exec.js";

test("stream ids match the public protocol", () => {
  assert.deepEqual(StreamId, { Stdin: 0, Stdout: 1, Stderr: 2, Exit: 3, StdinEof: 4 });
});

test("encodeFrame prefixes the stream id and keeps every byte", () => {
  const payload = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const frame = encodeFrame(StreamId.Stdout, payload);
  assert.equal(frame.length, 257);
  assert.equal(frame[0], 1);
  assert.ok(Buffer.from(frame.subarray(1)).equals(payload));
  assert.deepEqual([...encodeFrame(StreamId.StdinEof)], [4]);
  assert.deepEqual([...encodeFrame(StreamId.Stderr, Buffer.alloc(0))], [2]);
});

test("the exit frame is two bytes", () => {
  assert.deepEqual([...encodeExitFrame(0)], [3, 0]);
  assert.deepEqual([...encodeExitFrame(143)], [3, 143]);
  assert.deepEqual([...encodeExitFrame(256 + 7)], [3, 7]);
});

test("decodeFrame splits stream id and payload", () => {
  assert.equal(decodeFrame(Buffer.alloc(0)), null);
  const d = decodeFrame(Buffer.from([0, 104, 105]));
  assert.equal(d?.stream, 0);
  assert.equal(d?.payload.toString(), "hi");
  assert.equal(decodeFrame(Buffer.from([4]))?.payload.length, 0);
});

test("close codes: 1000 for success, 4000 + code otherwise", () => {
  assert.equal(closeCodeForExit(0), 1000);
  assert.equal(closeCodeForExit(1), 4001);
  assert.equal(closeCodeForExit(137), 4137);
  assert.equal(closeCodeForExit(300), 4255);
});

test("parseClientControl accepts resize and signal, ignores the rest", () => {
  assert.deepEqual(parseClientControl('{"type":"resize","cols":120,"rows":40}'), {
    type: "resize",
    cols: 120,
    rows: 40,
  });
  assert.deepEqual(parseClientControl('{"type":"signal","signal":"TERM"}'), { type: "signal", signal: "TERM" });
  assert.equal(parseClientControl('{"type":"resize","cols":0,"rows":40}'), null);
  assert.equal(parseClientControl('{"type":"resize","cols":"x","rows":40}'), null);
  assert.equal(parseClientControl('{"type":"ping"}'), null);
  assert.equal(parseClientControl("not json"), null);
  assert.equal(parseClientControl("null"), null);
});

test("FrameReader: length-prefixed frames come out whole, however the chunks cut them", () => {
  const frames = [encodeFrame(StreamId.Stdout, Buffer.from("hello")), encodeFrame(StreamId.Stderr), encodeExitFrame(7)];
  const stream = Buffer.concat(frames.flatMap((f) => [frameLength(f), f]));
  for (const size of [1, 2, 3, 5, 7, stream.length]) {
    const reader = new FrameReader();
    const out: Uint8Array[] = [];
    for (let at = 0; at < stream.length; at += size) out.push(...reader.push(stream.subarray(at, at + size)));
    assert.deepEqual(
      out.map((f) => [...f]),
      frames.map((f) => [...f]),
      `chunks of ${size}`,
    );
    assert.equal(reader.buffered, 0);
  }
  const big = new Uint8Array(70_000).fill(9);
  assert.deepEqual([...frameLength(big)], [0, 1, 0x11, 0x70]);
});
