import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SdkErrorCode, StreamError, UmsError } from "./errors.js";
import { collectEvents } from "./ndjson.js";

/** A response whose body arrives in the given pieces (lines may be split anywhere). */
function response(...pieces: string[]): Response {
  const enc = new TextEncoder();
  return new Response(
    new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of pieces) c.enqueue(enc.encode(p));
        c.close();
      },
    }),
  );
}

describe("NDJSON streams (spec section 6)", () => {
  it("yields one event per line, however the lines are split, blank lines skipped", async () => {
    const seen: string[] = [];
    const events = await collectEvents(
      response('{"type":"info","da', 'ta":"é"}\n\n{"type":"stdout","data":"x"}\n{"type":"complete","data":"ok"}'),
      (e) => seen.push(e.type),
    );
    assert.deepEqual(events, [
      { type: "info", data: "é" },
      { type: "stdout", data: "x" },
      { type: "complete", data: "ok" },
    ]);
    assert.deepEqual(seen, ["info", "stdout", "complete"]);
  });

  it("an error event throws StreamError with its message and the event (checkpoint and service shapes)", async () => {
    for (const [line, message] of [
      ['{"type":"error","error":"disk full","time":"t"}', "disk full"],
      ['{"type":"error","data":"could not be started","timestamp":1}', "could not be started"],
    ] as const) {
      await assert.rejects(collectEvents(response('{"type":"info","data":"a"}\n', `${line}\n`)), (err: unknown) => {
        assert.ok(err instanceof StreamError && err instanceof UmsError, String(err));
        assert.equal(err.message, message);
        assert.equal(err.code, SdkErrorCode.StreamFailed);
        assert.equal(err.event?.type, "error");
        return true;
      });
    }
  });

  it("a stream cut before its complete event, or a line that is not an event, is an error", async () => {
    await assert.rejects(collectEvents(response('{"type":"info","data":"a"}\n')), StreamError);
    await assert.rejects(collectEvents(response("<html>\n")), (err: unknown) => {
      assert.ok(err instanceof UmsError);
      assert.equal(err.code, SdkErrorCode.BadResponse);
      return true;
    });
    await assert.rejects(collectEvents(response('{"data":1}\n')), /without a type/);
  });
});
