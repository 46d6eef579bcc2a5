import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { hashToken } from "../../auth/tokens.js";
import { ControlClient } from "../../testing/control-client.js";
import { startWithUnit, type TestServer } from "../../testing/server.js";
import { upgradeAnswer } from "../../testing/ws-upgrade.js";
import { HIGH_WATER, LOW_WATER } from "./transport.js";

// The control websocket (api/control/) against a real server and unit: how it is offered, exec ops
// (pipes and TTY, stdin, exit codes), several ops on one connection, bad input, other organizations,
// revoked tokens, and a client that stops reading.

const UNIT = "ctl";

describe("control websocket: offer and exec", () => {
  let s: TestServer;
  let token: string;
  const wsUrl = (prefix: string, name = UNIT) => `${s.url.replace("http", "ws")}/v1/${prefix}/${name}/control`;
  const open = (prefix = "sprites") => ControlClient.open(wsUrl(prefix), token);

  before(async () => {
    ({ s, token } = await startWithUnit("ctl", UNIT));
  });
  after(() => s?.close());

  it("is offered on both prefixes by a successful upgrade; refused before it otherwise", async () => {
    assert.equal((await upgradeAnswer(wsUrl("sprites"), token)).status, 101);
    assert.equal((await upgradeAnswer(wsUrl("units"), token)).status, 101);
    // The Go client takes a refused upgrade for "no control here" and falls back to its other routes.
    const missing = await upgradeAnswer(wsUrl("sprites", "nosuch"), token);
    assert.equal(missing.status, 404);
    assert.equal(JSON.parse(missing.body).code, ErrorCode.UnitNotFound);
    assert.equal((await upgradeAnswer(wsUrl("sprites"), "ums_bogus")).status, 401);
    const plain = await s.api("GET", `/v1/sprites/${UNIT}/control`, { token });
    assert.equal(plain.status, 400);
    assert.match(plain.text, /websocket upgrade/);
  });

  it("runs a pipe exec: stdin (raw frames, EOF as [4]), stdout, stderr, exit code", async () => {
    const c = await open();
    // The Go client names `path` and sends raw stdin; the JS client does not, and sends stdin with
    // its stream id 0 first (bytes 0 inside the data are data either way).
    for (const args of [{ path: "sh" }, {}]) {
      const r = await c.exec(["sh", "-c", "cat | od -An -c | tr -s ' '; echo oops >&2; exit 3"], {
        stdin: [Buffer.from("hi "), Buffer.from([0, 0x41])],
        args,
      });
      assert.equal(r.messages[0]?.type, "session_info", "the exec's frames are /exec's: session_info first");
      assert.equal(r.stdout, " h i \\0 A\n", JSON.stringify(args));
      assert.equal(r.stderr, "oops\n");
      assert.equal(r.exitFrame, 3);
      assert.deepEqual(r.end, { type: "op.complete", args: { exitCode: 3 } });
    }
    await c.close();
  });

  it("runs several ops one after another on one connection, in either framing", async () => {
    const c = await open("units");
    for (let i = 0; i < 3; i++) {
      const r = await c.exec(["sh", "-c", `echo run-${i}; exit ${i}`]);
      assert.equal(r.stdout, `run-${i}\n`);
      assert.equal(r.end.args.exitCode, i);
    }
    // A Go-style filesystem op on the same connection, then exec again.
    const listed = await c.fs("fs.list", { path: "/", workingDir: "/" });
    assert.equal(listed.end.type, "op.complete");
    assert.ok(listed.answer.entries.some((e: { name: string }) => e.name === "home"));
    const again = await c.exec(["echo", "again"]);
    assert.equal(again.stdout, "again\n");
    await c.close();
  });

  it("runs a TTY exec: raw bytes, resize as text or as the JS client's binary JSON, exit in op.complete", async () => {
    const c = await open();
    c.start("exec", { cmd: ["bash"], tty: "true", rows: "30", cols: "100", stdin: "true" });
    let out = "";
    const until = async (needle: string) => {
      while (!out.includes(needle)) {
        const f = await c.next();
        if (ControlClient.envelope(f)) throw new Error(`op ended early: ${f.text}; output ${out}`);
        if (f.binary) out += f.data.toString("latin1");
      }
    };
    c.send(Buffer.from("stty size\r"));
    await until("30 100");
    c.send(JSON.stringify({ type: "resize", cols: 120, rows: 40 }));
    c.send(Buffer.from("stty size\r"));
    await until("40 120");
    c.send(Buffer.from(JSON.stringify({ type: "resize", cols: 90, rows: 20 })));
    c.send(Buffer.from("stty size\r"));
    await until("20 90");
    c.send(Buffer.from("exit 2\r"));
    const rest = await c.execOutcome();
    assert.ok(rest.messages.some((m) => m.type === "exit" && m.exit_code === 2));
    assert.deepEqual(rest.end, { type: "op.complete", args: { exitCode: 2 } });
    await c.close();
  });

  it("answers bad input with op.error naming it, and the connection goes on", async () => {
    const c = await open();
    c.start("exec", { cmd: ["ls"], env: ["NOT VALID"] });
    const bad = await c.nextEnvelope();
    assert.equal(bad.type, "op.error");
    assert.equal(bad.args.code, ErrorCode.Validation);
    assert.match(bad.args.error, /env: 'NOT VALID' is not KEY=VALUE/);
    c.start("teleport", {});
    const unknown = await c.nextEnvelope();
    assert.equal(unknown.args.code, ErrorCode.ControlUnknownOp);
    assert.match(unknown.args.error, /unknown operation 'teleport' \(one of exec, proxy, fs\.read/);
    c.send("control:{not json");
    assert.match((await c.nextEnvelope()).args.error, /not JSON/);
    c.send(Buffer.from([1, 2, 3]));
    assert.match((await c.nextEnvelope()).args.error, /no operation running/);
    c.start("exec", { id: "99999" });
    const gone = await c.nextEnvelope();
    assert.equal(gone.args.code, ErrorCode.SessionNotFound);
    assert.equal(gone.args.status, 404);
    // op.start while one runs ends the running one with op.error.
    c.start("exec", { cmd: ["sleep", "30"] });
    await c.next(); // session_info: it runs
    c.start("exec", { cmd: ["true"] });
    const busy = await c.nextEnvelope();
    assert.equal(busy.args.code, ErrorCode.ControlProtocol);
    assert.match(busy.args.error, /already running/);
    assert.equal((await c.exec(["echo", "still here"])).stdout, "still here\n");
    await c.close();
  });

  it("release stops a running exec and the connection is ready for the next op", async () => {
    const c = await open();
    c.start("exec", { cmd: ["sh", "-c", "echo started; sleep 60"] });
    for (;;) {
      const f = await c.next();
      if (f.binary && f.data.toString().includes("started")) break;
    }
    c.release();
    // Frames of the released op that were already under way are the client's to skip.
    c.start("exec", { cmd: ["echo", "next"] });
    let r = await c.execOutcome();
    while (!r.messages.some((m) => m.type === "session_info" && m.command?.includes("echo"))) r = await c.execOutcome();
    assert.equal(r.stdout, "next\n");
    await c.close();
  });

  it("refuses another organization's unit, and stops serving a revoked token on an open connection", async () => {
    const other = await s.token("ctl-other");
    const cross = await upgradeAnswer(wsUrl("sprites"), other);
    assert.equal(cross.status, 404, "another organization's unit is not found, exactly as a missing one");
    const mine = await s.token("ctl");
    const c = await ControlClient.open(wsUrl("sprites"), mine);
    assert.equal((await c.exec(["true"])).end.type, "op.complete");
    const found = await s.server.store.tokens.authenticate(hashToken(mine));
    assert.ok(found);
    await s.server.store.tokens.revoke(found.token.id, new Date().toISOString());
    c.start("exec", { cmd: ["true"] });
    const refused = await c.nextEnvelope();
    assert.equal(refused.type, "op.error");
    assert.equal(refused.args.code, ErrorCode.Unauthorized);
    c.startPlain("fs.list", { path: "/", workingDir: "/" });
    const answer = JSON.parse((await c.next()).text);
    assert.equal(answer.code, ErrorCode.Unauthorized);
    await c.close();
  });

  it("stops serving a token on an open connection once it expires", async () => {
    const admin = await s.token("ctl");
    const expiresAt = Date.now() + 1_500;
    const minted = await s.api("POST", "/v1/organizations/ctl/tokens", {
      token: admin,
      json: { description: "short", expires_at: new Date(expiresAt).toISOString() },
    });
    assert.equal(minted.status, 201, minted.text);
    const c = await ControlClient.open(wsUrl("sprites"), minted.body.token as string);
    assert.equal((await c.exec(["true"])).end.type, "op.complete");
    await new Promise((r) => setTimeout(r, expiresAt - Date.now() + 100));
    c.start("exec", { cmd: ["true"] });
    const refused = await c.nextEnvelope();
    assert.equal(refused.type, "op.error");
    assert.equal(refused.args.code, ErrorCode.TokenExpired);
    await c.close();
  });

  it("holds a client that stops reading to a bounded buffer, and loses nothing when it reads again", async () => {
    const c = await open();
    const total = 128 * 1024 * 1024;
    c.start("exec", { cmd: ["head", "-c", String(total), "/dev/zero"] });
    await c.next(); // session_info
    c.ws.pause();
    // What the server holds for this client: its websockets' unsent bytes, sampled while the client reads nothing.
    const sockets = s.server.app.websocketServer.clients as Set<{ bufferedAmount: number }>;
    let most = 0;
    const until = Date.now() + 5000;
    while (Date.now() < until) {
      for (const ws of sockets) most = Math.max(most, ws.bufferedAmount);
      await new Promise((r) => setTimeout(r, 20));
    }
    c.ws.resume();
    let got = 0;
    let end: ReturnType<typeof ControlClient.envelope>;
    for (;;) {
      const f = await c.next();
      end = ControlClient.envelope(f);
      if (end) break;
      if (f.binary && f.data[0] === 1) got += f.data.length - 1;
    }
    assert.equal(got, total);
    assert.deepEqual(end, { type: "op.complete", args: { exitCode: 0 } });
    assert.ok(most > LOW_WATER, `the client fell behind (${most} bytes waited at most), so the bound was tested`);
    assert.ok(most <= HIGH_WATER + 256 * 1024, `${most} bytes waited for a client that does not read`);
    await c.close();
  });
});
