import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  AuthenticationError,
  ConnectionError,
  DEFAULT_BASE_URL,
  SDK_VERSION,
  SdkErrorCode,
  TimeoutError,
  UmsClient,
  UmsError,
  Unit,
} from "./index.js";
import { freePort, type LaunchedServer, launchServer } from "./testing/launcher.js";

/** Runs `fn` with UMS_URL / UMS_TOKEN set as given (undefined: unset), then restores them. */
async function withEnv<T>(vars: Record<string, string | undefined>, fn: () => Promise<T> | T): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const apply = (v: Record<string, string | undefined>) => {
    for (const [k, value] of Object.entries(v)) {
      if (value === undefined) delete process.env[k];
      else process.env[k] = value;
    }
  };
  apply(vars);
  try {
    return await fn();
  } finally {
    apply(saved);
  }
}

describe("UmsClient configuration and transport", () => {
  let server: LaunchedServer;
  let token: string;

  before(async () => {
    server = await launchServer();
    token = await server.token("transport");
  });
  after(async () => {
    await server?.stop();
  });

  it("reads UMS_URL and UMS_TOKEN when baseUrl and token are omitted", async () => {
    await withEnv({ UMS_URL: `${server.baseUrl}/`, UMS_TOKEN: token }, async () => {
      const unit = await Unit.create("from-env");
      assert.equal(unit.organization, "transport");
      assert.equal(unit.client.baseUrl, server.baseUrl, "the trailing slash is dropped");
    });
  });

  it("explicit options win over the environment", async () => {
    await withEnv({ UMS_URL: "http://127.0.0.1:1", UMS_TOKEN: "ums_wrong" }, async () => {
      const unit = await Unit.create("explicit", { baseUrl: server.baseUrl, token });
      assert.equal(unit.name, "explicit");
    });
  });

  it("without a token anywhere, constructing a client is an AuthenticationError", () => {
    return withEnv({ UMS_URL: undefined, UMS_TOKEN: undefined }, () => {
      assert.throws(
        () => new UmsClient(),
        (err: unknown) => {
          assert.ok(err instanceof AuthenticationError, `got ${String(err)}`);
          assert.equal(err.code, SdkErrorCode.NoToken);
          assert.equal(err.status, undefined);
          return true;
        },
      );
      assert.equal(new UmsClient({ token: "t" }).baseUrl, DEFAULT_BASE_URL);
    });
  });

  it("rejects a baseUrl that is not an http(s) URL and a negative timeout", () => {
    for (const baseUrl of ["not a url", "ftp://example.com", "http://example.com/?q=1"]) {
      assert.throws(
        () => new UmsClient({ baseUrl, token: "t" }),
        (err: unknown) => err instanceof UmsError && err.code === SdkErrorCode.InvalidConfig,
        baseUrl,
      );
    }
    assert.throws(
      () => new UmsClient({ baseUrl: "http://x", token: "t", timeoutMs: -1 }),
      (err: unknown) => err instanceof UmsError && err.code === SdkErrorCode.InvalidConfig,
    );
  });

  it("sends the bearer token and no Content-Type on bodiless requests", async () => {
    const seen: Array<Record<string, string>> = [];
    const client = new UmsClient({
      baseUrl: server.baseUrl,
      token,
      headers: { "x-trace": "abc" },
      fetch: (input, init) => {
        seen.push(Object.fromEntries(new Headers(init?.headers).entries()));
        return fetch(input, init);
      },
    });
    const unit = await Unit.create("headers", { client });
    await unit.delete();
    const [create, del] = seen;
    assert.equal(create?.authorization, `Bearer ${token}`);
    assert.equal(create?.["content-type"], "application/json");
    assert.equal(create?.["x-trace"], "abc");
    assert.equal(create?.["user-agent"], `ums-sdk-js/${SDK_VERSION}`);
    assert.equal(del?.authorization, `Bearer ${token}`);
    assert.equal(del?.["content-type"], undefined);
  });

  it("an unreachable server is a ConnectionError", async () => {
    const port = await freePort(); // nothing listens there any more
    const client = new UmsClient({ baseUrl: `http://127.0.0.1:${port}`, token });
    await assert.rejects(Unit.listPage({ client }), (err: unknown) => {
      assert.ok(err instanceof ConnectionError, `got ${String(err)}`);
      assert.equal(err.code, SdkErrorCode.Connection);
      assert.equal(err.status, undefined);
      assert.match(err.message, /ECONNREFUSED/);
      return true;
    });
  });

  it("SDK_VERSION matches package.json", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    assert.equal(SDK_VERSION, pkg.version);
  });
});

describe("time limits and cancellation (a server that accepts but never answers)", () => {
  let silent: Server;
  let baseUrl: string;
  const sockets = new Set<Socket>();

  before(async () => {
    silent = createServer((socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const addr = silent.address();
    baseUrl = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it("a request slower than the client's timeoutMs is a TimeoutError", async () => {
    const client = new UmsClient({ baseUrl, token: "t", timeoutMs: 200 });
    const started = Date.now();
    await assert.rejects(Unit.connect("slow", { client }), (err: unknown) => {
      assert.ok(err instanceof TimeoutError, `got ${String(err)}`);
      assert.equal(err.code, SdkErrorCode.Timeout);
      assert.match(err.message, /200 ms/);
      return true;
    });
    const took = Date.now() - started;
    assert.ok(took >= 150 && took < 5_000, `took ${took} ms`);
  });

  it("a per-call timeoutMs overrides the client's", async () => {
    const client = new UmsClient({ baseUrl, token: "t", timeoutMs: 60_000 });
    await assert.rejects(Unit.connect("slow", { client, timeoutMs: 100 }), TimeoutError);
  });

  it("an aborted signal rejects with its own reason, not a TimeoutError", async () => {
    const client = new UmsClient({ baseUrl, token: "t", timeoutMs: 60_000 });
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(Unit.connect("slow", { client, signal: controller.signal }), (err: unknown) => {
      assert.equal(err, reason);
      return true;
    });
  });
});

describe("a connection reset before the answer (a kept-alive connection the server was closing)", () => {
  let stub: Server;
  let baseUrl: string;
  let resetNext = false;
  const seen: string[] = [];

  before(async () => {
    stub = createServer((socket) => {
      let head = "";
      socket.on("data", (d: Buffer) => {
        head += d.toString("latin1");
        if (!head.includes("\r\n\r\n")) return;
        seen.push(head.slice(0, head.indexOf(" ")));
        head = "";
        if (resetNext) {
          resetNext = false;
          socket.resetAndDestroy(); // RST: the client reads ECONNRESET, no answer
          return;
        }
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}');
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((r) => stub.listen(0, "127.0.0.1", r));
    baseUrl = `http://127.0.0.1:${(stub.address() as { port: number }).port}`;
  });
  after(() => new Promise<void>((r) => stub.close(() => r())));

  it("sends an idempotent request once more, on a new connection", async () => {
    const client = new UmsClient({ baseUrl, token: "t" });
    seen.length = 0;
    resetNext = true;
    assert.deepEqual(await client.request("GET", "/v1/units/x"), { ok: true });
    assert.deepEqual(seen, ["GET", "GET"]);
    resetNext = true;
    assert.deepEqual(await client.request("DELETE", "/v1/units/x"), { ok: true });
    assert.deepEqual(seen, ["GET", "GET", "DELETE", "DELETE"]);
  });

  it("does not send a POST twice: the caller gets the ConnectionError", async () => {
    const client = new UmsClient({ baseUrl, token: "t" });
    seen.length = 0;
    resetNext = true;
    await assert.rejects(client.request("POST", "/v1/units", { body: { name: "x" } }), (err: unknown) => {
      assert.ok(err instanceof ConnectionError, `got ${String(err)}`);
      assert.match(err.message, /ECONNRESET/);
      return true;
    });
    assert.deepEqual(seen, ["POST"]);
  });
});
