import assert from "node:assert/strict";
import { request } from "node:http";
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import type { LocalNode } from "../local/local-node.js";
import { NodeEndpoint } from "./node-endpoint.js";
import { RemoteNode } from "./remote-node.js";

/**
 * Issue #15: an API process's session with a node (node-endpoint.ts, remote-node.ts), against a
 * node whose units are stand-ins (each "agent" an echo server): a lease the API releases, or whose
 * session ends, no longer holds its unit; a wake's connection is its first call's; records too
 * large for a header take the older way; a node that restarted is found again.
 */
describe("the API's session with a node", () => {
  const secret = "s".repeat(40);
  let echo: Server;
  let held = 0;
  /** How long the stand-in node takes to wake a unit. */
  let wakeMs = 0;
  let endpoint: NodeEndpoint;
  let port = 0;

  /** A node whose wake counts holds and whose agent is the echo server. */
  const fakeNode = {
    async wake() {
      if (wakeMs > 0) await new Promise((r) => setTimeout(r, wakeMs));
      held++;
      let released = false;
      return {
        booted: false,
        release() {
          if (!released) held--;
          released = true;
        },
        agentSocket: async () => {
          const s = netConnect((echo.address() as { port: number }).port, "127.0.0.1");
          await new Promise((r) => s.once("connect", r));
          return s;
        },
      };
    },
  } as unknown as LocalNode;

  const listen = async () => {
    endpoint = await NodeEndpoint.listen({
      node: fakeNode,
      secret,
      log: pino({ level: "silent" }),
      host: "127.0.0.1",
      port,
    });
    port = endpoint.port;
  };
  const remote = () => new RemoteNode({ id: "n1", name: "n1", host: "127.0.0.1", port, secret });
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(ok(), what);
  };
  const org = { id: "org-1", slug: "o" } as never;
  const unit = (extra: object = {}) => ({ id: "unit-1", name: "u", ...extra }) as never;
  /** One round trip over the lease's first agent connection (the echo server answers in kind). */
  const echoOnce = (lease: Awaited<ReturnType<RemoteNode["wake"]>>) =>
    new Promise<string>((resolve, reject) => {
      // The connection the wake made, which the lease hands its agent client's first call.
      const connect = (lease as unknown as { first?: Socket }).first;
      if (!connect) return reject(new Error("the wake made no connection to the agent"));
      connect.once("data", (d) => resolve(d.toString()));
      connect.write("ping");
    });

  before(async () => {
    echo = createServer((s) => s.on("data", (d) => s.write(d)).on("error", () => {}));
    await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
    await listen();
  });
  after(async () => {
    await endpoint.close();
    await new Promise((r) => echo.close(r));
  });

  it("a wake holds its unit until the lease is released; its connection reaches the agent", async () => {
    const node = remote();
    for (let i = 0; i < 3; i++) {
      const lease = await node.wake(org, unit());
      assert.equal(held, 1);
      assert.equal(await echoOnce(lease), "ping");
      lease.release();
      await until("the release reached the node", () => held === 0);
    }
  });

  it("the proxy's wake (agent: false) is a lease without a connection", async () => {
    const lease = await remote().wake(org, unit(), { agent: false });
    assert.equal(held, 1);
    assert.equal((lease as unknown as { first?: Socket }).first, undefined);
    lease.release();
    await until("released", () => held === 0);
  });

  it("records too large for a header take a wake request held open; its end releases", async () => {
    const lease = await remote().wake(org, unit({ network: "x".repeat(20_000) }));
    assert.equal(held, 1);
    lease.release();
    await until("released", () => held === 0);
  });

  it("an API process that goes away releases what it held (its session ends)", async () => {
    const node = remote();
    await node.wake(org, unit());
    await node.wake(org, unit());
    assert.equal(held, 2);
    // What a dying process's sockets do: the session's connection ends.
    const session = await (node as unknown as { sessionOpening: Promise<{ close(): void }> }).sessionOpening;
    session.close();
    await until("both released", () => held === 0);
  });

  it("a wake the API gave up on (its connection ended while the unit woke) holds nothing", async () => {
    const node = remote();
    (await node.wake(org, unit())).release();
    await until("released", () => held === 0);
    const session = await (node as unknown as { sessionOpening: Promise<{ id: string }> }).sessionOpening;
    wakeMs = 300;
    try {
      const req = request({
        host: "127.0.0.1",
        port,
        method: "GET",
        path: "/node/v1/wake?agent=1",
        headers: {
          authorization: `Bearer ${secret}`,
          connection: "Upgrade",
          upgrade: "ums-node-splice",
          "x-ums-session": session.id,
          "x-ums-args": Buffer.from(JSON.stringify([org, unit()])).toString("base64url"),
        },
      });
      req.on("error", () => {});
      req.end();
      await new Promise((r) => setTimeout(r, 50));
      req.destroy();
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(held, 0, "the lease no one learned was released");
    } finally {
      wakeMs = 0;
    }
  });

  it("a node that restarted (its sessions gone) is found again by the next wake", async () => {
    const node = remote();
    const first = await node.wake(org, unit());
    first.release();
    await until("released", () => held === 0);
    await endpoint.close();
    await listen();
    const again = await node.wake(org, unit());
    assert.equal(held, 1);
    again.release();
    await until("released", () => held === 0);
  });
});
