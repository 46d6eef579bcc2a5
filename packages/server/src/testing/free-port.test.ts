import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { freePort } from "./free-port.js";

describe("freePort", () => {
  it("gives ports below the kernel's ephemeral range (outgoing connections never hold them) that a server can listen on", async () => {
    const start = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    const ports = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      if (start - 10_000 >= 1000) assert.ok(port >= 10_000 && port < start, `${port} is below ${start}`);
      ports.add(port);
      await new Promise<void>((resolve, reject) => {
        const srv = createServer().once("error", reject);
        srv.listen(port, "127.0.0.1", () => srv.close(() => resolve()));
      });
    }
    assert.ok(ports.size > 10, "drawn at random, not the same port each time");
  });
});
