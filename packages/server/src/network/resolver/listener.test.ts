import assert from "node:assert/strict";
import { createSocket } from "node:dgram";
import { connect } from "node:net";
import { afterEach, beforeEach, describe, it } from "node:test";
import * as dns from "dns-packet";
import { freePort } from "../../testing/free-port.js";
import { UnitListener } from "./listener.js";

const query = (name: string) =>
  dns.encode({ type: "query", id: 77, flags: dns.RECURSION_DESIRED, questions: [{ type: "A", name }] });

/** A handler whose answers the test releases by hand, after it knows a query is pending. */
function heldHandler() {
  const pending: ((b: Buffer) => void)[] = [];
  let notify: (() => void) | undefined;
  return {
    handle: (q: Buffer) =>
      new Promise<Buffer>((resolve) => {
        pending.push(() => resolve(q));
        notify?.();
      }),
    asked: () =>
      new Promise<void>((r) => {
        if (pending.length > 0) r();
        else notify = r;
      }),
    answerAll: () => {
      for (const p of pending.splice(0)) p(Buffer.alloc(0));
    },
  };
}

/**
 * Issue #11: the unit stopped (its listener closed) while an upstream answer was pending; the
 * answer then went to a closed UDP socket, `send` threw, and the unhandled rejection exited
 * `ums serve`. An answer that comes too late is dropped, over UDP and TCP alike.
 */
describe("a unit's resolver listener", () => {
  const faults: unknown[] = [];
  const onFault = (err: unknown) => faults.push(err);
  beforeEach(() => {
    faults.length = 0;
    process.on("unhandledRejection", onFault);
    process.on("uncaughtException", onFault);
  });
  afterEach(() => {
    process.off("unhandledRejection", onFault);
    process.off("uncaughtException", onFault);
  });

  it("answers over UDP while open, and drops an answer that comes after close", async () => {
    const port = await freePort();
    const h = heldHandler();
    const listener = new UnitListener("127.0.0.1", "127.0.0.1", h.handle, port);
    await listener.open();
    const client = createSocket("udp4");
    const got: Buffer[] = [];
    client.on("message", (m) => got.push(m));
    try {
      client.send(query("first.example"), port, "127.0.0.1");
      await h.asked();
      h.answerAll();
      for (let i = 0; i < 100 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(got.length, 1, "answered while open");

      client.send(query("slow.example"), port, "127.0.0.1");
      await h.asked();
      await listener.close(); // the unit stopped
      h.answerAll(); // the slow upstream answers now
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(faults.map(String), [], "no fault escaped");
      assert.equal(got.length, 1, "nothing sent after close");
    } finally {
      client.close();
      await listener.close();
    }
  });

  it("holds at most 64 TCP connections of a unit; the rest are closed at once", async () => {
    const port = await freePort();
    const listener = new UnitListener("127.0.0.1", "127.0.0.1", heldHandler().handle, port);
    await listener.open();
    const socks = Array.from({ length: 70 }, () => connect(port, "127.0.0.1").on("error", () => {}));
    try {
      await Promise.all(socks.map((s) => new Promise((r) => s.once("connect", r))));
      const count = () => socks.filter((s) => s.destroyed || s.readableEnded).length;
      for (let i = 0; i < 250 && count() < 6; i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 100));
      const closed = count();
      assert.equal(closed, 6, `${closed} of 70 connections were closed`);
    } finally {
      for (const s of socks) s.destroy();
      await listener.close();
    }
  });

  it("drops a TCP answer whose connection was closed meanwhile", async () => {
    const port = await freePort();
    const h = heldHandler();
    const listener = new UnitListener("127.0.0.1", "127.0.0.1", h.handle, port);
    await listener.open();
    try {
      const q = query("slow.example");
      const len = Buffer.alloc(2);
      len.writeUInt16BE(q.length);
      const sock = connect(port, "127.0.0.1");
      sock.on("error", () => {});
      await new Promise((r) => sock.once("connect", r));
      sock.write(Buffer.concat([len, q]));
      await h.asked();
      await listener.close();
      sock.destroy();
      h.answerAll();
      await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(faults.map(String), [], "no fault escaped");
    } finally {
      await listener.close();
    }
  });
});
