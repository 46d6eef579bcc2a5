import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, it } from "node:test";
import { exchange } from "../../testing/http-exchange.js";
import { startWithUnit, type TestServer } from "../../testing/server.js";

/**
 * Issue #19 finding 10: the proxy answers 502 before it reads a request's body (nothing listens in
 * the unit); the rest of that body must not block the connection: the next request on it is
 * answered (the body was read and dropped), or the early answer closed the connection and the
 * next request goes on a new one.
 */
describe("proxy: an early answer leaves the connection usable", () => {
  let s: TestServer;
  let token: string;
  const url = (p: string) => `${s.url}/v1/units/idle${p}`;
  const auth = () => ({ authorization: `Bearer ${token}`, "content-type": "application/octet-stream" });

  before(async () => {
    ({ s, token } = await startWithUnit("early", "idle"));
    // Boot it (nothing listens on its port 8080).
    const first = await exchange(new http.Agent(), url("/"), { headers: auth() });
    assert.equal(first.status, 502);
  });
  after(() => s?.close());

  /** Runs `fn` with an agent that keeps one connection, destroyed afterwards. */
  async function onOneConnection(fn: (agent: http.Agent) => Promise<void>): Promise<void> {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await fn(agent);
    } finally {
      agent.destroy();
    }
  }

  for (const [label, size, chunked] of [
    ["a 300 KB POST", 300 * 1024, false],
    ["a 4 MiB POST", 4 * 1024 * 1024, false],
    ["a chunked 300 KB POST (no length)", 300 * 1024, true],
  ] as const) {
    it(`${label} answered 502: the next request on the same kept-alive connection is answered`, () =>
      onOneConnection(async (agent) => {
        const post = await exchange(agent, url("/upload"), {
          method: "POST",
          headers: auth(),
          body: Buffer.alloc(size, 1),
          chunked,
        });
        assert.equal(post.status, 502);
        const next = await exchange(agent, url("/after"), { headers: auth() });
        assert.equal(next.status, 502, "the next request got an answer");
        assert.equal(next.socket, post.socket, "on the same connection: the rest of the body was read and dropped");
        assert.ok(next.ms < 10_000, `answered in ${next.ms} ms`);
      }));
  }

  it("a body declared larger than the drain limit is not waited for: the 502 closes the connection", () =>
    onOneConnection(async (agent) => {
      const post = await exchange(agent, url("/upload"), {
        method: "POST",
        headers: auth(),
        declared: 1024 * 1024 * 1024,
        body: Buffer.alloc(300 * 1024, 1),
      });
      assert.equal(post.status, 502);
      assert.equal(post.connection, "close");
      const next = await exchange(agent, url("/after"), { headers: auth() });
      assert.equal(next.status, 502, "the next request got an answer");
      assert.notEqual(next.socket, post.socket, "on a new connection");
    }));
});
