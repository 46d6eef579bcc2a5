import assert from "node:assert/strict";
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { within } from "../../util/within.js";
import { NoLineError, readLine } from "./line.js";

describe("readLine: the first line of a connection (node sessions and standby wakes)", () => {
  let server: Server;
  let port = 0;
  /** What the server sends on each connection, then whether it ends it. */
  let send: { bytes: string; end: boolean } = { bytes: "", end: false };

  before(async () => {
    server = createServer((s) => {
      s.on("error", () => {});
      if (send.end) s.end(send.bytes);
      else s.write(send.bytes);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const a = server.address();
    port = typeof a === "object" && a ? a.port : 0;
  });
  after(() => {
    server.close();
  });

  const connect = async (what: typeof send): Promise<Socket> => {
    send = what;
    const socket = netConnect({ host: "127.0.0.1", port });
    socket.on("error", () => {});
    await new Promise((r) => socket.once("connect", r));
    return socket;
  };

  it("reads the line and leaves what follows it in the socket", async () => {
    const socket = await connect({ bytes: '{"session":"s1"}\nrest', end: true });
    assert.equal(await within(readLine(socket, 1024), 5000, "not settled within 5000 ms"), '{"session":"s1"}');
    const rest: Buffer[] = [];
    socket.on("data", (b: Buffer) => rest.push(b));
    await new Promise((r) => socket.once("end", r));
    assert.equal(Buffer.concat(rest).toString(), "rest");
    socket.destroy();
  });

  it("rejects a line longer than allowed", async () => {
    const socket = await connect({ bytes: "x".repeat(2000), end: false });
    const err = await within(
      readLine(socket, 1024).catch((e: unknown) => e),
      5000,
      "not settled within 5000 ms",
    );
    assert.ok(err instanceof NoLineError && !err.ended, String(err));
    socket.destroy();
  });

  it("rejects a connection that ends before its line", async () => {
    const socket = await connect({ bytes: "no newline", end: true });
    const err = await within(
      readLine(socket, 1024).catch((e: unknown) => e),
      5000,
      "not settled within 5000 ms",
    );
    assert.ok(err instanceof NoLineError && err.ended, String(err));
    socket.destroy();
  });

  it("rejects at once a connection whose end came before the call (its events went by unheard)", async () => {
    const socket = await connect({ bytes: "", end: true });
    socket.resume();
    await new Promise((r) => socket.once("close", r));
    assert.ok(socket.readableEnded);
    const err = await within(
      readLine(socket, 1024).catch((e: unknown) => e),
      5000,
      "not settled within 5000 ms",
    );
    assert.ok(err instanceof NoLineError && err.ended, String(err));
  });
});
