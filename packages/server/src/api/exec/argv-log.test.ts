import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { testDialects } from "../../testing/dialects.js";
import { execHttp } from "../../testing/exec-client.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

const sqlite = testDialects[0];

/** Issue #19 finding 10: commands carry credentials; the request log never holds an exec's argv. */
describe("exec argv stays out of the log", () => {
  let s: TestServer;
  let token: string;
  const logs: string[] = [];

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    const logStream = new PassThrough();
    logStream.on("data", (d) => logs.push(d.toString()));
    s = await startTestServer(sqlite, { logStream });
    token = await s.token("argv");
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "argv" } })).status, 201);
  });
  after(() => s?.close());

  it("HTTP and websocket execs, run or refused, log their requests without an argument", async () => {
    const secret = `argv-secret-${randomBytes(8).toString("hex")}`;
    const before = logs.length;
    const r = await execHttp(s.url, token, "argv", ["sh", "-c", 'test "$0" = "$1"', secret, secret], {
      env: [`E=${secret}`],
    });
    assert.equal(r.exitCode, 0, r.stderr.toString());
    // Refused before it runs (a bad parameter): still logged, still without its argv.
    const bad = await s.api("POST", `/v1/units/argv/exec?cmd=echo&cmd=${secret}&tty=maybe`, { token });
    assert.equal(bad.status, 400, bad.text);
    const q = new URLSearchParams();
    for (const c of ["sh", "-c", "exit 0", secret]) q.append("cmd", c);
    const ws = new WebSocket(`${s.url.replace("http", "ws")}/v1/units/argv/exec?${q}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const frames: Buffer[] = [];
    ws.on("message", (d, binary) => binary && frames.push(d as Buffer));
    await new Promise<void>((resolve, reject) => {
      ws.once("close", () => resolve());
      ws.once("error", reject);
    });
    assert.deepEqual([...(frames.at(-1) ?? [])], [3, 0], "the websocket exec ran");
    // The log lines are written when each response ends (a websocket upgrade writes none here).
    const deadline = Date.now() + 10_000;
    const execLines = () => logs.slice(before).filter((l) => l.includes("/v1/units/argv/exec"));
    while (execLines().length < 2 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    assert.ok(execLines().length >= 2, logs.slice(before).join(""));
    for (const line of execLines()) assert.match(line, /cmd=\[redacted\]/);
    const all = logs.join("");
    for (const form of [secret, encodeURIComponent(secret), secret.slice(-16)]) {
      assert.ok(!all.includes(form), `the log holds an exec argument: ${form}`);
    }
  });
});
