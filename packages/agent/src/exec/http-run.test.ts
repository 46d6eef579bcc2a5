// The agent's plain HTTP exec (`POST /exec`, http-run.ts) against the real bundled agent.
import assert from "node:assert/strict";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { FrameReader, StreamId } from "@ums/protocol/exec";
import { eventually, httpJson, query, type RunningAgent, startAgent } from "../testing/harness.js";
import { serveHttpExec } from "./http-run.js";
import type { SessionTable } from "./registry.js";

interface Answer {
  status: number;
  frames: Uint8Array[];
  body: string;
}

/** POST /exec with `input` as the body; the answer's frames (or its text, for an error). */
function post(agent: RunningAgent, params: Parameters<typeof query>[0], input?: string[]): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: agent.socket, method: "POST", path: `/exec?${query(params)}` }, (res) => {
      const reader = new FrameReader();
      const frames: Uint8Array[] = [];
      let body = "";
      res.on("data", (chunk: Buffer) => {
        if (res.statusCode === 200) frames.push(...reader.push(chunk));
        else body += chunk.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, frames, body }));
    });
    req.on("error", reject);
    for (const chunk of input ?? []) req.write(chunk);
    req.end();
  });
}

const streamText = (a: Answer, id: number) =>
  Buffer.concat(a.frames.filter((f) => f[0] === id).map((f) => f.subarray(1))).toString();

describe("agent exec as one HTTP request (POST /exec)", () => {
  let agent: RunningAgent;
  before(async () => {
    agent = await startAgent();
  });
  after(async () => {
    await agent?.stop();
  });

  test("streams stdout and stderr frames, each after its length, and ends with the exit frame", async () => {
    const a = await post(agent, { cmd: ["sh", "-c", "echo out; echo err >&2; printf '%070000d' 0; exit 3"] });
    assert.equal(a.status, 200);
    assert.equal(streamText(a, StreamId.Stderr), "err\n");
    assert.equal(streamText(a, StreamId.Stdout), `out\n${"0".repeat(70000)}`);
    assert.deepEqual([...(a.frames.at(-1) ?? [])], [StreamId.Exit, 3]);
    assert.equal(a.frames.filter((f) => f[0] === StreamId.Exit).length, 1);
  });

  test("the body is stdin with stdin=true, and /dev/null without", async () => {
    const a = await post(agent, { cmd: ["cat"], stdin: true }, ["abc", "def"]);
    assert.equal(streamText(a, StreamId.Stdout), "abcdef");
    const b = await post(agent, { cmd: ["cat"] }, ["ignored"]);
    assert.equal(streamText(b, StreamId.Stdout), "");
    assert.deepEqual([...(b.frames.at(-1) ?? [])], [StreamId.Exit, 0]);
  });

  test("refusals: a bad query, a TTY, an unknown user: 400 with what to fix", async () => {
    const cases: [Parameters<typeof query>[0], RegExp][] = [
      [{ cols: "80" }, /cmd is required/],
      [{ cmd: ["ls"], tty: true }, /TTY session needs a websocket/],
      [{ cmd: ["ls"], user: "no-such-user-ums" }, /unknown user/],
    ];
    for (const [params, why] of cases) {
      const a = await post(agent, params);
      assert.equal(a.status, 400);
      const body = JSON.parse(a.body) as { code: string; errors: string[] };
      assert.equal(body.code, "UMS_VALIDATION");
      assert.match(body.errors.join(), why);
    }
  });

  test("the host going away ends the session and its process", async () => {
    const marker = `ums-http-run-${process.pid}`;
    const req = request({
      socketPath: agent.socket,
      method: "POST",
      path: `/exec?${query({ cmd: ["sh", "-c", `echo started; exec sleep 300 # ${marker}`] })}`,
    });
    req.on("error", () => {});
    await new Promise<void>((resolve) => {
      req.on("response", (res) => res.once("data", () => resolve()));
      req.end();
    });
    const running = async () => ((await httpJson(agent, "GET", "/exec")).body as { command: string }[]).length;
    assert.equal(await running(), 1);
    req.destroy();
    await eventually(async () => (await running()) === 0, "the session to end", 5000);
  });
});

describe("agent exec as one HTTP request: a session that cannot be made", () => {
  test("is an error answer with its reason, not a 200 cut short", async () => {
    // The agent's request handler answers a throw with a 500 while no head was sent (server.ts).
    const table = {
      create: () => {
        throw new Error("no session today");
      },
    } as unknown as SessionTable;
    const server = createServer((req, res) => {
      try {
        serveHttpExec(table, { stdin: false } as never, {} as never, req, res);
      } catch (err) {
        assert.equal(res.headersSent, false, "nothing was sent before the session existed");
        res
          .writeHead(500, { "content-type": "application/json" })
          .end(JSON.stringify({ error: (err as Error).message }));
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { port } = server.address() as AddressInfo;
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: "127.0.0.1", port, method: "POST", path: "/exec?cmd=true" }, (res) => {
          let body = "";
          res.on("data", (d: Buffer) => {
            body += d.toString();
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("error", reject);
        req.end();
      });
      assert.equal(answer.status, 500);
      assert.match(answer.body, /no session today/);
    } finally {
      server.close();
    }
  });
});
