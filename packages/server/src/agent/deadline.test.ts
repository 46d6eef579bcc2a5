import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import { describe, it } from "node:test";
import { AgentDeadline, AgentTimeoutError, leadsToAgentAfter, plainEndpoint } from "./deadline.js";

/** A connection as far as the deadline sees one: connecting until told otherwise. */
const fakeSocket = (connecting: boolean) => Object.assign(new EventEmitter(), { connecting }) as unknown as Socket;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The two deadlines of a call to a unit's agent (issue #19 finding 8). */
describe("AgentDeadline", () => {
  const ep = plainEndpoint("/nowhere", { connectMs: 100, answerMs: 200 });

  it("expires in the connect phase when the connection is not made", async () => {
    const errors: Error[] = [];
    const d = new AgentDeadline(ep, (e) => errors.push(e));
    d.watch(fakeSocket(true));
    await sleep(400);
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof AgentTimeoutError);
    assert.equal(errors[0].phase, "connect");
    assert.match(errors[0].message, /could not connect to the unit's agent within 0.1 s/);
  });

  it("gives the answer its own time (plus the extra) once connected", async () => {
    const errors: AgentTimeoutError[] = [];
    const start = performance.now();
    let at = 0;
    const d = new AgentDeadline(
      ep,
      (e) => {
        at = performance.now() - start;
        errors.push(e as AgentTimeoutError);
      },
      100,
    );
    const socket = fakeSocket(true);
    d.watch(socket);
    await sleep(80);
    socket.emit("connect");
    await sleep(600);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.phase, "answer");
    assert.equal(errors[0]?.ms, 300);
    assert.ok(at >= 370 && at < 2000, `expired after ${Math.round(at)} ms`);
  });

  it("on a socket that leads to the agent only after a wake (issue #15), begins the answer's time then", async () => {
    const errors: AgentTimeoutError[] = [];
    const start = performance.now();
    let at = 0;
    const d = new AgentDeadline(ep, (e) => {
      at = performance.now() - start;
      errors.push(e as AgentTimeoutError);
    });
    const socket = fakeSocket(false);
    let woken = () => {};
    leadsToAgentAfter(socket, new Promise<void>((r) => (woken = r)));
    d.watch(socket);
    // Longer than both deadlines: a boot behind the wake is not the agent's delay.
    await sleep(400);
    assert.equal(errors.length, 0, "no deadline ran while the unit woke");
    woken();
    await sleep(500);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.phase, "answer");
    assert.ok(at >= 590 && at < 2000, `expired after ${Math.round(at)} ms`);

    // A wake that fails leaves the call to the socket's error: no deadline error on top.
    const failed = new AgentDeadline(ep, () => assert.fail("a deadline after a failed wake"));
    const other = fakeSocket(false);
    leadsToAgentAfter(other, Promise.reject(new Error("the wake failed")));
    failed.watch(other);
    await sleep(400);
  });

  it("does not expire once answered, and tells the endpoint of a miss", async () => {
    const told: AgentTimeoutError[] = [];
    const telling = {
      ...ep,
      timedOut: (e: AgentTimeoutError) => {
        told.push(e);
        return new Error("504");
      },
    };
    const answered = new AgentDeadline(telling, () => assert.fail("expired after the answer"));
    answered.watch(fakeSocket(false));
    answered.answered();
    const missed: Error[] = [];
    new AgentDeadline(telling, (e) => missed.push(e)).watch(fakeSocket(false));
    await sleep(400);
    assert.equal(told.length, 1);
    assert.deepEqual(
      missed.map((e) => e.message),
      ["504"],
    );
  });
});
