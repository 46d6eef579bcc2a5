// The readable log lines of `ums serve` on a terminal (pure formatting), and `--log-format pretty`
// of a real `ums serve`.

import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { freePort } from "@ums/server/testing";
import { api, createToken, serve, tempDir, ums } from "../testing/ums-cli.js";
import { bar, formatRecord, imageProgress, prettyDestination } from "./serve-log.js";

function sink(tty: boolean): { stream: NodeJS.WriteStream; text: () => string } {
  let text = "";
  const w = new Writable({
    write(chunk: Buffer, _e, done) {
      text += chunk.toString();
      done();
    },
  }) as unknown as NodeJS.WriteStream;
  Object.assign(w, { isTTY: tty, columns: 60 });
  return { stream: w, text: () => text };
}

describe("ums serve's readable logs", () => {
  it("formats a record as time, level, message and its fields (strings quoted only when needed)", () => {
    const time = new Date(2026, 0, 2, 3, 4, 5).getTime();
    assert.equal(
      formatRecord({
        level: 30,
        time,
        pid: 1,
        hostname: "h",
        service: "ums",
        msg: "request",
        url: "/v1/units",
        status: 201,
        note: "two words",
      }),
      '03:04:05 INFO  request url=/v1/units status=201 note="two words"',
    );
    assert.equal(
      formatRecord({
        level: 50,
        time,
        msg: "x",
        err: { type: "Error", message: "boom", stack: "Error: boom\n    at f (a.js:1:2)" },
      }),
      '03:04:05 ERROR x err="Error: boom (at f (a.js:1:2))"',
    );
    assert.deepEqual(imageProgress({ msg: "image: I: extracting", percent: 40 }), {
      percent: 40,
      message: "I: extracting",
    });
    assert.equal(imageProgress({ msg: "ums listening" }), null);
    assert.equal(bar(50, 10), "[#####-----]  50%");
  });

  it("redraws image progress in place on a terminal, and ends it before the next line", () => {
    const out = sink(true);
    const d = prettyDestination(out.stream);
    const rec = (o: object) => `${JSON.stringify({ level: 30, time: 0, ...o })}\n`;
    d.write(rec({ msg: "image: bootstrap", step: "bootstrap", percent: 10 }));
    // Pino may hand over a line in pieces.
    const second = rec({ msg: "image: I: extracting", step: "bootstrap", percent: 60 });
    d.write(second.slice(0, 7));
    d.write(second.slice(7));
    d.write(rec({ msg: "ums listening", port: 7070 }));
    const text = out.text();
    const redraw = "\r\u001b[K";
    assert.ok(
      text.startsWith(
        `${redraw}image [###${"-".repeat(27)}]  10% bootstrap${redraw}image [${"#".repeat(18)}${"-".repeat(12)}]  60% I: extracting\n`,
      ),
      JSON.stringify(text),
    );
    assert.match(text, /\n\d\d:\d\d:\d\d INFO {2}ums listening port=7070\n$/);
    // Not a terminal: one line per record.
    const plain = sink(false);
    const p = prettyDestination(plain.stream);
    p.write(rec({ msg: "image: bootstrap", step: "bootstrap", percent: 10 }));
    assert.match(plain.text(), /^\d\d:\d\d:\d\d INFO {2}image: bootstrap step=bootstrap percent=10\n$/);
  });

  it("--log-format pretty gives readable lines; a bad format exits 2", async (t) => {
    const dir = await tempDir(t);
    const token = await createToken(dir, "pretty");
    const port = await freePort();
    const server = await serve(t, port, ["--data-dir", dir, "--listen", `127.0.0.1:${port}`, "--log-format", "pretty"]);
    assert.equal((await api(server.url, "GET", "/v1/units", token)).status, 200);
    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
    const stderr = server.stderr();
    assert.match(stderr, new RegExp(`^\\d\\d:\\d\\d:\\d\\d INFO  ums listening .*port=${port}`, "m"));
    assert.match(stderr, /^\d\d:\d\d:\d\d INFO {2}request .*url=\/v1\/units .*status=200/m);
    assert.equal(stderr.includes('{"level"'), false, "no JSON lines");
    assert.equal(stderr.includes(token), false);

    const bad = await ums(["serve", "--data-dir", dir, "--log-format", "xml"], { timeoutMs: 60_000 });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /--log-format must be auto, json or pretty/);
  });
});
