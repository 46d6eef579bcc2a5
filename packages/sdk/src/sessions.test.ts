// unit.sessions (TTY and pipes, detach, list, attach, kill), unit.tunnel and unit.policies through
// the SDK itself, against a real ums server with a real unit (the CLI tests use them too, but a
// user of the SDK must be able to rely on them on their own).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type ExecConnection, UmsClient, Unit, ValidationError } from "./index.js";
import { type LaunchedServer, launchServer } from "./testing/launcher.js";

/** What a connection prints, until `want` appears (or fails after `ms`). */
function until(conn: ExecConnection, want: string, ms = 15_000): Promise<string> {
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${want}' within ${ms} ms; got ${JSON.stringify(out)}`)), ms);
    const on = (_stream: string, bytes: Buffer) => {
      out += bytes.toString();
      if (out.includes(want)) {
        clearTimeout(timer);
        conn.off("data", on);
        resolve(out);
      }
    };
    conn.on("data", on);
  });
}

describe("unit.sessions, unit.tunnel and unit.policies against a real ums server", () => {
  let server: LaunchedServer;
  let unit: Unit;

  before(async () => {
    server = await launchServer();
    const client = new UmsClient({ baseUrl: server.baseUrl, token: await server.token("sessions"), timeoutMs: 60_000 });
    unit = await Unit.create("sess", { client });
  });
  after(async () => {
    await server?.stop();
  });

  it("a pipe session: stdout and stderr apart, stdin, and the exit code", async () => {
    const conn = await unit.sessions.open(["sh", "-c", "read x; echo out-$x; echo err-$x >&2; exit 3"]);
    const streams: Record<string, string> = { stdout: "", stderr: "" };
    conn.on("data", (stream, bytes) => {
      streams[stream] += bytes.toString();
    });
    conn.write("abc\n");
    conn.end();
    assert.equal(await conn.exit, 3);
    assert.deepEqual(streams, { stdout: "out-abc\n", stderr: "err-abc\n" });
  });

  it("a TTY session: detached, listed, attached again with its output replayed, then killed", async () => {
    const conn = await unit.sessions.open(["sh", "-c", "echo ready; sleep 300"], { tty: true, cols: 100, rows: 30 });
    await until(conn, "ready");
    const id = conn.sessionId;
    assert.equal(typeof id, "number");
    conn.detach();
    assert.equal(await conn.exit, null, "a detached connection has no exit code");

    const listed = (await unit.sessions.list()).find((s) => s.id === id);
    assert.ok(listed, "the detached session is listed");
    assert.equal(listed.tty, true);
    assert.equal(listed.isActive, true);

    const again = await unit.sessions.attach(id as number);
    await until(again, "ready");
    const events = await unit.sessions.kill(id as number, { signal: "TERM", timeoutSeconds: 5 });
    assert.ok(events.length > 0, "kill reports what happened");
    assert.notEqual(await again.exit, 0, "killed, not a clean exit");
    assert.equal(
      (await unit.sessions.list()).find((s) => s.id === id && s.isActive),
      undefined,
      "no longer running",
    );
  });

  it("a tunnel to a TCP port in the unit carries bytes both ways", async () => {
    const listener = await unit.sessions.open([
      "/.unit/bin/node",
      "-e",
      'require("net").createServer((s)=>s.on("data",(d)=>s.end("echo:"+d))).listen(7777,()=>console.log("up"))',
    ]);
    await until(listener, "up");
    const tunnel = await unit.tunnel(7777);
    assert.match(tunnel.target, /:7777$/);
    let got = "";
    const closed = new Promise<void>((r) => tunnel.onClose(r));
    tunnel.onData((b) => {
      got += b.toString();
    });
    tunnel.send(Buffer.from("ping"));
    await closed;
    assert.equal(got, "echo:ping");
    const done = await unit.sessions.list();
    for (const s of done.filter((x) => x.isActive)) await unit.sessions.kill(s.id, { signal: "KILL" });
  });

  it("policies: the network policy is read, set, and a bad rule is a ValidationError", async () => {
    const before = await unit.policies.network();
    assert.ok(Array.isArray(before.rules));
    const set = await unit.policies.setNetwork([{ domain: "example.com", action: "allow" }]);
    assert.deepEqual(
      set.rules.map((r) => [r.domain, r.action]),
      [["example.com", "allow"]],
    );
    assert.deepEqual((await unit.policies.network()).rules, set.rules);
    await assert.rejects(unit.policies.setNetwork([{ domain: "example.com", action: "maybe" }]), ValidationError);
  });
});
