import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { RelaySocket, relayOf } from "../../agent/relay.js";
import { RunningLimitError } from "../../lifecycle/errors.js";
import { NodeUnreachableError } from "../errors.js";
import type { LocalNode } from "../local/local-node.js";
import { NodeEndpoint } from "./node-endpoint.js";
import { RemoteNode } from "./remote-node.js";

/**
 * Issue #15: an API process's session with a node (node-endpoint.ts, remote-node.ts), against a
 * node whose units are stand-ins (each "agent" an echo server): a lease the API releases, or whose
 * session ends, no longer holds its unit; a wake's connection is its first call's; records too
 * large for a header take the older way; a node that restarted is found again; later wakes go over
 * connections opened ahead (standby), which take nothing but a wake of a session.
 */
describe("the API's session with a node", () => {
  const secret = "s".repeat(40);
  let echo: Server;
  let held = 0;
  /** How long the stand-in node takes to wake a unit. */
  let wakeMs = 0;
  /** Runs `fn` while the stand-in node takes `ms` to wake a unit. */
  const slowWakes = async (ms: number, fn: () => Promise<void>) => {
    wakeMs = ms;
    try {
      await fn();
    } finally {
      wakeMs = 0;
    }
  };
  /** What the stand-in node's wake throws, if anything. */
  let failWake: Error | undefined;
  let endpoint: NodeEndpoint;
  let port = 0;

  /** A node whose wake counts holds and whose agent is the echo server. */
  const fakeNode = {
    async wake() {
      if (wakeMs > 0) await new Promise((r) => setTimeout(r, wakeMs));
      if (failWake) throw failWake;
      held++;
      let released = false;
      return {
        booted: false,
        release() {
          if (!released) held--;
          released = true;
        },
        // As a node's lease makes it (lease.ts): raw reads, relayed from its own buffers.
        agentSocket: async () => {
          const relay = new RelaySocket({ host: "127.0.0.1", port: (echo.address() as { port: number }).port });
          relay.beginRaw();
          await new Promise((r) => relay.socket.once("connect", r));
          return relay;
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

  /** What the stand-in agent answers to "long": all of it, then its end at once. */
  const long = randomBytes(24 << 20);
  before(async () => {
    echo = createServer((s) =>
      s.on("data", (d) => (d.toString() === "long" ? s.end(long) : s.write(d))).on("error", () => {}),
    );
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
      // After the first, a wake's answer comes behind its first call (wakePipelined).
      assert.equal(await echoOnce(lease), "ping");
      assert.equal(held, 1);
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
    await slowWakes(300, async () => {
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
    });
  });

  /** The standby connections the remote keeps idle (StandbyPool). */
  const idleOf = (node: RemoteNode) => (node as unknown as { standby: { idle: Socket[] } }).standby.idle;

  /** A remote that woke a unit once (released): its two standby connections ready. */
  const withStandby = async () => {
    const node = remote();
    (await node.wake(org, unit())).release();
    await until("two standby connections are ready", () => idleOf(node).length === 2);
    return node;
  };

  it("a node that restarted (its sessions gone) is found again by the next wake", async () => {
    const node = remote();
    const first = await node.wake(org, unit());
    first.release();
    await until("released", () => held === 0);
    await endpoint.close();
    await listen();
    // A restart takes longer than this process needs to see its connections' end (a wake on one
    // not seen yet fails: the test of a standby connection that ends before its answer).
    await until("the closed standby connections left the pool", () => idleOf(node).length === 0);
    const again = await node.wake(org, unit());
    assert.equal(await echoOnce(again), "ping");
    assert.equal(held, 1);
    again.release();
    await until("released", () => held === 0);
  });

  it("after a wake, the next ones go over connections opened ahead (standby), with and without the agent", async () => {
    const node = await withStandby();
    for (let i = 0; i < 3; i++) {
      const ready = [...idleOf(node)];
      const lease = await node.wake(org, unit());
      const first = (lease as unknown as { first?: Socket }).first;
      assert.ok(first && ready.includes(first), "the wake's connection is one opened ahead");
      assert.equal(await echoOnce(lease), "ping");
      assert.equal(held, 1);
      lease.release();
      await until("released", () => held === 0);
    }
    const lease = await node.wake(org, unit(), { agent: false });
    assert.equal(held, 1);
    assert.equal((lease as unknown as { first?: Socket }).first, undefined);
    lease.release();
    await until("released", () => held === 0);
    await until("refilled", () => idleOf(node).length === 2);
  });

  it("an agent's long answer reaches a slow API whole and in order, through the node's and the API's reuse of their buffers", async () => {
    const node = remote();
    (await node.wake(org, unit())).release();
    for (const _ of [1, 2]) {
      await until("two standby connections are ready", () => idleOf(node).length === 2);
      const lease = await node.wake(org, unit());
      const first = (lease as unknown as { first?: Socket }).first as Socket;
      // The API's connection reads into its own buffers: a raw file read is relayed from them (agent/fs.ts).
      assert.ok(relayOf(first), "the wake's connection to the agent is a RelaySocket");
      const got: Buffer[] = [];
      const ended = new Promise<void>((resolve, reject) => {
        first.once("end", resolve);
        first.once("close", () => reject(new Error("closed before its end")));
      });
      // A slow reader: the node's writes to it wait, and a buffer reused before its write is done
      // (RelaySocket's ring) would show as other bytes.
      first.on("data", (d: Buffer) => {
        got.push(d);
        first.pause();
        setTimeout(() => first.resume(), 2);
      });
      first.write("long");
      await ended;
      assert.ok(Buffer.concat(got).equals(long), `the answer came whole (${Buffer.concat(got).length} bytes)`);
      lease.release();
      await until("released", () => held === 0);
    }
  });

  it("standby connections the node closed leave the pool; the wake then opens its own", async () => {
    const node = await withStandby();
    const ready = [...idleOf(node)];
    await endpoint.close();
    await listen();
    await until("the closed ones left the pool", () => idleOf(node).length === 0);
    assert.ok(ready.every((s) => s.destroyed));
    const lease = await node.wake(org, unit());
    assert.equal(await echoOnce(lease), "ping");
    lease.release();
    await until("released", () => held === 0);
  });

  it("a standby connection that ends before its answer (the node closed it meanwhile): the wake says the node is unreachable; the next one works", async () => {
    const node = await withStandby();
    // The node's ends of them, closed in the same turn as the wake: the API cannot have seen it yet.
    for (const s of (endpoint as unknown as { spliced: Set<Socket> }).spliced) s.destroy();
    const lease = await node.wake(org, unit());
    // The first call had gone behind the wake: it cannot be sent again, and fails as the node's.
    await assert.rejects(lease.httpTarget(), (err: Error) => err instanceof NodeUnreachableError);
    lease.release();
    await until("the closed ones left the pool", () => idleOf(node).length === 0);
    const next = await node.wake(org, unit());
    assert.equal(await echoOnce(next), "ping");
    next.release();
    await until("released", () => held === 0);
  });

  it("a wake on a standby connection returns at once, and is answered behind its first call", async () => {
    const node = await withStandby();
    await slowWakes(300, async () => {
      const start = performance.now();
      const lease = await node.wake(org, unit());
      assert.ok(performance.now() - start < 250, "the wake returned before the unit was awake");
      assert.equal(held, 0);
      assert.equal(lease.booted, false);
      // The agent client's request goes at once, and is answered once the node has the unit awake.
      assert.equal(await echoOnce(lease), "ping");
      assert.ok(performance.now() - start >= 290, "the answer came after the wake");
      assert.equal(held, 1);
      lease.release();
      await until("released", () => held === 0);
    });
  });

  it("an upload behind a wake waits in the sockets while the unit wakes, and reaches the agent whole", async () => {
    const node = await withStandby();
    await slowWakes(400, async () => {
      const lease = await node.wake(org, unit());
      const first = (lease as unknown as { first?: Socket }).first as Socket;
      const body = randomBytes(32 << 20);
      const echoed: Buffer[] = [];
      let got = 0;
      const all = new Promise<void>((resolve) =>
        first.on("data", (d: Buffer) => {
          echoed.push(d);
          got += d.length;
          if (got >= body.length) resolve();
        }),
      );
      first.write(body);
      await new Promise((r) => setTimeout(r, 200));
      // The node keeps at most 1 MiB of it while the unit wakes (and reads no more): the rest waits.
      const nodeSide = [...(endpoint as unknown as { spliced: Set<Socket> }).spliced];
      const read = Math.max(...nodeSide.map((s) => s.bytesRead));
      assert.ok(read < 2 << 20, `the node read ${read} bytes of the call while the unit woke`);
      await all;
      assert.ok(Buffer.concat(echoed).equals(body), "every byte, in order");
      lease.release();
      await until("released", () => held === 0);
    });
  });

  it("a lease released before the node's answer, its connection still open, is released as soon as it is held", async () => {
    const node = await withStandby();
    await slowWakes(200, async () => {
      const lease = await node.wake(org, unit());
      // As a call that has its connection does: the release then cannot end the connection.
      const taken = lease as unknown as { first?: Socket };
      const socket = taken.first as Socket;
      taken.first = undefined;
      socket.write("ping");
      lease.release();
      await until("the connection was ended by the node", () => socket.destroyed);
      assert.equal(held, 0, "nothing held");
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(held, 0, "nothing held later either");
    });
  });

  it("a wake that fails fails the lease's first call, and every other use of it, with the node's error", async () => {
    const node = await withStandby();
    failWake = new RunningLimitError("at the running limit (test)");
    try {
      const lease = await node.wake(org, unit());
      const first = (lease as unknown as { first?: Socket }).first as Socket;
      // The agent client's first call has the wake's connection, its request already sent.
      const call = lease.agent.json("GET", "/health");
      assert.equal((lease as unknown as { first?: Socket }).first, undefined, "the first call took the connection");
      const isTheWakes = (err: Error) =>
        err instanceof RunningLimitError && err.message === "at the running limit (test)";
      await assert.rejects(call, isTheWakes);
      assert.ok(first.destroyed);
      await assert.rejects(lease.httpTarget(), isTheWakes);
      await assert.rejects(lease.agent.json("GET", "/health"), isTheWakes);
      lease.release();
      assert.equal(held, 0);
    } finally {
      failWake = undefined;
    }
  });

  /** A standby connection made by hand: its 101 read, then `line` sent; resolves with what comes back until it ends. */
  const standbyRaw = (line: string | Buffer, auth = `Bearer ${secret}`) =>
    new Promise<string>((resolve, reject) => {
      const s = netConnect(port, "127.0.0.1");
      let text = "";
      let sent = false;
      s.on("data", (d) => {
        text += d.toString();
        if (!sent && text.includes("\r\n\r\n")) {
          sent = true;
          if (text.startsWith("HTTP/1.1 101")) {
            text = "";
            s.write(line);
          }
        }
      });
      s.on("error", () => {});
      s.on("close", () => resolve(text));
      setTimeout(() => {
        s.destroy();
        reject(new Error(`no end; so far: ${text}`));
      }, 5000).unref();
      s.write(
        `GET /node/v1/standby HTTP/1.1\r\nhost: n\r\nauthorization: ${auth}\r\nconnection: Upgrade\r\nupgrade: ums-node-splice\r\n\r\n`,
      );
    });

  it("attack: a standby connection is refused without the secret, and takes only a wake of a live session", async () => {
    const node = remote();
    (await node.wake(org, unit())).release();
    await until("released", () => held === 0);
    const session = await (node as unknown as { sessionOpening: Promise<{ id: string }> }).sessionOpening;

    assert.match(await standbyRaw("x\n", `Bearer ${"t".repeat(40)}`), /^HTTP\/1\.1 401 /);
    const notWake = JSON.parse(await standbyRaw(`${JSON.stringify({ release: "x" })}\n`));
    assert.match(notWake.error.message, /takes one line/);
    const noSession = JSON.parse(
      await standbyRaw(`${JSON.stringify({ wake: { session: "nope", records: [org, unit()] } })}\n`),
    );
    assert.equal(noSession.error.kind, "SessionGoneError");
    const badRecords = JSON.parse(
      await standbyRaw(`${JSON.stringify({ wake: { session: session.id, records: [org] } })}\n`),
    );
    assert.match(badRecords.error.message, /takes one line/);
    assert.equal(await standbyRaw("not json\n").then((t) => JSON.parse(t).error.kind), "Error");
    // A lease id the API names must be one: short, plain, and not one held already.
    const badId = JSON.parse(
      await standbyRaw(
        `${JSON.stringify({ wake: { session: session.id, records: [org, unit()], lease: "../x y" } })}\n`,
      ),
    );
    assert.match(badId.error.message, /lease: 8-64 letters/);
    // A line without end: cut once past the limit, having held nothing.
    assert.equal(await standbyRaw(Buffer.alloc((1 << 20) + 10, "a")), "");
    assert.equal(held, 0);
    // The same session's wake by hand works, and its lease is the session's to release.
    const answer = await new Promise<string>((resolve) => {
      const s = netConnect(port, "127.0.0.1");
      let text = "";
      s.on("data", (d) => {
        text += d.toString();
        if (text.startsWith("HTTP/1.1 101") && text.includes("\r\n\r\n")) {
          text = "";
          s.write(`${JSON.stringify({ wake: { session: session.id, records: [org, unit()] } })}\n`);
        } else if (text.endsWith("\n")) {
          s.destroy();
          resolve(text);
        }
      });
      s.write(
        `GET /node/v1/standby HTTP/1.1\r\nhost: n\r\nauthorization: Bearer ${secret}\r\nconnection: Upgrade\r\nupgrade: ums-node-splice\r\n\r\n`,
      );
    });
    assert.equal(typeof JSON.parse(answer).lease, "string");
    assert.equal(held, 1);
    // Named by the API, and in use: refused, holding nothing more.
    const named = "a-lease-named-by-the-api";
    const holding = netConnect(port, "127.0.0.1");
    const heldAnswer = await new Promise<string>((resolve) => {
      let text = "";
      holding.on("data", (d) => {
        text += d.toString();
        if (text.startsWith("HTTP/1.1 101") && text.includes("\r\n\r\n")) {
          text = "";
          holding.write(`${JSON.stringify({ wake: { session: session.id, records: [org, unit()], lease: named } })}\n`);
        } else if (text.endsWith("\n")) resolve(text);
      });
      holding.write(
        `GET /node/v1/standby HTTP/1.1\r\nhost: n\r\nauthorization: Bearer ${secret}\r\nconnection: Upgrade\r\nupgrade: ums-node-splice\r\n\r\n`,
      );
    });
    assert.equal(JSON.parse(heldAnswer).lease, named);
    assert.equal(held, 2);
    const twice = JSON.parse(
      await standbyRaw(`${JSON.stringify({ wake: { session: session.id, records: [org, unit()], lease: named } })}\n`),
    );
    assert.match(twice.error.message, /in use already/);
    assert.equal(held, 2);
    holding.destroy();
    (session as unknown as { close(): void }).close();
    await until("the session's end released it", () => held === 0);
  });

  it("a standby wake whose connection ends while the unit wakes holds nothing", async () => {
    const node = await withStandby();
    await slowWakes(300, async () => {
      const giveUp = new AbortController();
      const waking = node.wake(org, unit(), { signal: giveUp.signal });
      await new Promise((r) => setTimeout(r, 50));
      giveUp.abort();
      await assert.rejects(waking);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(held, 0, "the lease no one learned was released");
    });
  });
});
