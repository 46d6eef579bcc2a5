// leasedHttpExec: the agent's plain HTTP exec, or null for an agent from before it (404), which the
// exec route then reaches over its websocket. The lease's agent is a stand-in here (its answers are
// what the test needs); exec.test.ts runs the real path against a unit.
import assert from "node:assert/strict";
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import { AgentAnswerError } from "../../agent/errors.js";
import type { UnitLease } from "../../node/unit-node.js";
import { leasedHttpExec, openWebsockets } from "./websockets.js";

function answer(status: number, body = ""): IncomingMessage {
  const res = new PassThrough() as unknown as IncomingMessage & PassThrough;
  res.statusCode = status;
  res.end(body);
  return res;
}

function lease(status: number, body?: string) {
  const state = { released: 0, calls: [] as string[], bodies: [] as unknown[] };
  const l = {
    unit: { id: `u-${status}-${Math.random()}`, name: "box" },
    agent: {
      request: async (method: string, path: string, opts?: { bodyAfterHead?: unknown }) => {
        state.calls.push(`${method} ${path}`);
        state.bodies.push(opts?.bodyAfterHead);
        return answer(status, body);
      },
    },
    release: () => {
      state.released++;
    },
  } as unknown as UnitLease;
  return { l, state };
}

describe("leasedHttpExec", () => {
  it("an agent from before POST /exec (404): null, its place freed, the lease still held", async () => {
    const { l, state } = lease(404, '{"code":"UMS_NOT_FOUND","error":"no route for POST /exec"}');
    const stdin = new PassThrough();
    stdin.write("input for the websocket");
    assert.equal(await leasedHttpExec(l, "/exec?cmd=cat&stdin=true", stdin), null);
    assert.deepEqual(state.calls, ["POST /exec?cmd=cat&stdin=true"]);
    assert.equal(state.bodies[0], stdin, "stdin is offered only after the answer's head");
    assert.equal(stdin.readableFlowing, null, "and is left unread for the websocket");
    assert.equal(openWebsockets(l.unit.id), 0);
    assert.equal(state.released, 0);
  });

  it("a refusal (400): the agent's error, thrown with the lease released", async () => {
    const { l, state } = lease(400, '{"code":"UMS_VALIDATION","error":"invalid","errors":["cmd is required"]}');
    await assert.rejects(leasedHttpExec(l, "/exec"), (err: unknown) => {
      assert.ok(err instanceof AgentAnswerError);
      assert.equal(err.status, 400);
      return true;
    });
    assert.equal(state.released, 1);
    assert.equal(openWebsockets(l.unit.id), 0);
  });

  it("a session (200): its answer, counted against the unit's cap until it closes", async () => {
    const { l, state } = lease(200);
    const res = await leasedHttpExec(l, "/exec?cmd=true");
    assert.ok(res);
    assert.equal(openWebsockets(l.unit.id), 1);
    res.destroy();
    await new Promise((r) => setImmediate(r));
    assert.equal(openWebsockets(l.unit.id), 0);
    assert.equal(state.released, 0, "the exec route releases the lease when the answer is done");
  });
});
