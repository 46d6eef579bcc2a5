// connectAgent against fake agents on a Unix socket (issue #19 findings 6 and 8): an agent is the
// unit's, so it may answer an upgrade with anything or nothing. Each answer must become a rejection,
// never an 'error' event without a listener (that exited `ums serve`), and silence must end in time.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, beforeEach, describe, it } from "node:test";
import { AgentTimeoutError, plainEndpoint } from "./deadline.js";
import { AgentAnswerError } from "./errors.js";
import { connectAgent } from "./websocket.js";

/** A fake agent that answers every connection with `answer` (raw bytes, then the end), or holds it. */
function fakeAgent(path: string, answer: string | Buffer | null, opts: { destroy?: boolean } = {}): Promise<Server> {
  const held: Socket[] = [];
  const server = createServer((socket) => {
    socket.on("error", () => {});
    socket.once("data", () => {
      if (answer === null) return void held.push(socket);
      if (opts.destroy) return socket.destroy();
      socket.end(answer);
    });
  });
  server.on("close", () => {
    for (const s of held) s.destroy();
  });
  return new Promise((resolve) => server.listen(path, () => resolve(server)));
}

const http = (status: string, body: string) =>
  `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;

describe("connectAgent against agents that do not upgrade", () => {
  const dir = mkdtempSync(join(tmpdir(), "ums-agent-ws-"));
  const sock = join(dir, "agent.sock");
  let server: Server | undefined;
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);

  beforeEach(() => {
    uncaught.length = 0;
    process.on("uncaughtException", onUncaught);
  });
  afterEach(async () => {
    // A terminated handshake reports on a later tick: give it its ticks before looking.
    await new Promise((r) => setTimeout(r, 50));
    process.off("uncaughtException", onUncaught);
    await new Promise((r) => (server ? server.close(() => r(null)) : r(null)));
    server = undefined;
    assert.deepEqual(uncaught.map(String), [], "no error escaped as an uncaught exception");
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const [status, body] of [
    ["400 Bad Request", '{"errors":["cmd is required"],"code":"UMS_VALIDATION"}'],
    ["404 Not Found", '{"error":"no exec session 7","code":"UMS_SESSION_NOT_FOUND"}'],
    ["500 Internal Server Error", '{"error":"boom","code":"UMS_INTERNAL"}'],
    ["200 OK", "not an upgrade"],
  ] as const) {
    it(`rejects an answer of ${status} with the agent's status and what its body said`, async () => {
      server = await fakeAgent(sock, http(status, body));
      const err = await connectAgent(plainEndpoint(sock), "/exec?cmd=x").then(
        () => assert.fail("connected"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof AgentAnswerError, String(err));
      assert.equal(err.status, Number(status.slice(0, 3)));
      const said = body.startsWith("{") ? JSON.parse(body) : {};
      assert.equal(err.code, said.code);
      assert.equal(err.message, said.error ?? said.errors?.join("; ") ?? `the unit's agent answered ${err.status}`);
    });
  }

  it("rejects garbage, a 101 with a wrong accept key, and a connection closed without an answer", async () => {
    for (const [answer, destroy] of [
      [Buffer.from([0, 1, 2, 255, 254, 13, 10, 13, 10]), false],
      [
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: nope\r\n\r\n",
        false,
      ],
      ["", true],
    ] as const) {
      server = await fakeAgent(sock, answer, { destroy });
      await assert.rejects(connectAgent(plainEndpoint(sock), "/exec?cmd=x"));
      await new Promise((r) => server?.close(() => r(null)));
      server = undefined;
    }
  });

  it("rejects when nothing listens on the socket", async () => {
    await assert.rejects(connectAgent(plainEndpoint(join(dir, "none.sock")), "/exec"), /ENOENT/);
  });

  it("gives up on an agent that never answers, within its answer timeout, and reports it once", async () => {
    server = await fakeAgent(sock, null);
    const told: AgentTimeoutError[] = [];
    const ep = {
      ...plainEndpoint(sock, { connectMs: 1000, answerMs: 300 }),
      timedOut: (e: AgentTimeoutError) => {
        told.push(e);
        return new Error(`told: ${e.message}`);
      },
    };
    const start = performance.now();
    await assert.rejects(connectAgent(ep, "/exec?cmd=x"), /told: the unit's agent did not answer within 0.3 s/);
    const ms = performance.now() - start;
    assert.ok(ms >= 250 && ms < 5000, `gave up after ${Math.round(ms)} ms`);
    assert.equal(told.length, 1);
    assert.equal(told[0]?.phase, "answer");
  });

  it("keeps the deadline over a refusal whose body never ends", async () => {
    server = await fakeAgent(sock, null);
    server.removeAllListeners("connection");
    server.on("connection", (socket: Socket) => {
      socket.on("error", () => {});
      socket.once("data", () => socket.write('HTTP/1.1 400 Bad Request\r\ncontent-length: 1000000\r\n\r\n{"errors":'));
      server?.once("close", () => socket.destroy());
    });
    const ep = plainEndpoint(sock, { connectMs: 1000, answerMs: 300 });
    await assert.rejects(connectAgent(ep, "/exec"), AgentTimeoutError);
  });
});
