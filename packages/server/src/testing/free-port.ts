import { randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** Test ports are drawn from here up to just below the kernel's ephemeral range. */
const LOWEST = 10_000;

/**
 * The first port of the range the kernel gives outgoing connections their local port from
 * (`net.ipv4.ip_local_port_range`, 32768 by default).
 */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 0 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether a server can listen on `port` of loopback right now (the port is left free again). */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen({ port, host: "127.0.0.1", exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A port the kernel picks (its ephemeral range). */
function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A loopback TCP port nothing listens on right now (for a server a test or bench starts), drawn
 * below the kernel's ephemeral range. A port the kernel picks (port 0) comes from the range it
 * also gives every outgoing connection its local port from: between the pick and the server's
 * listen, or while a test restarts its server on the same port, any connection on the host (a
 * fetch, a database pool) may take it, and the server fails with EADDRINUSE (seen in a CI run).
 * Only when the range leaves no room below it does the kernel pick.
 */
export async function freePort(): Promise<number> {
  const below = ephemeralStart();
  if (below - LOWEST >= 1000) {
    for (let i = 0; i < 50; i++) {
      const port = randomInt(LOWEST, below);
      if (await canListen(port)) return port;
    }
  }
  return kernelPort();
}
