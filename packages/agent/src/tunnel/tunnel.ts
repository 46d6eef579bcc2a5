import type { IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import { joinHostPort, TUNNEL_TARGET_HEADER, TUNNEL_UPGRADE, tunnelHost, tunnelPort } from "@ums/protocol/tunnel";
import { rejectUpgrade, validation } from "../http/respond.js";

// The agent's end of a TCP tunnel (the host's `GET /v1/units/{name}/proxy`, packages/protocol/src/tunnel.ts):
//   GET /tunnel?host=…&port=… with `Upgrade: ums-tcp` → the agent connects to host:port from inside the
//   unit (its network namespace: `localhost` is the unit's loopback, and the unit's egress policy applies
//   as to any of its processes), then answers 101 naming the address it reached, and from then on the
//   connection carries the bytes both ways. An end of stream on either side is passed on as one (a
//   half-close: the other side may still send); an error or a reset on either side ends both. Errors
//   before the 101 are JSON answers: 400 (bad host or port), 502 (refused, unresolved, unreachable,
//   timed out: within DIAL_TIMEOUT_MS, well before the host's deadline on the agent's answer).

/** How long a connection to a tunnel's target may take (the host waits 10 s for the agent's answer). */
export const DIAL_TIMEOUT_MS = 5000;

/** `localhost` is the unit's own loopback: resolved here, never asked of the unit's resolver. */
function isLocalhost(host: string): boolean {
  const name = host.toLowerCase();
  return name === "localhost" || name.endsWith(".localhost");
}

/** A connection that failed, as the answer the host passes on (502, with one of the tunnel codes). */
function failure(err: NodeJS.ErrnoException & { errors?: NodeJS.ErrnoException[] }, where: string) {
  const codes = [err.code, ...(err.errors ?? []).map((e) => e.code)].filter((c): c is string => !!c);
  if (codes.includes("ECONNREFUSED")) {
    return {
      error: `nothing listens on ${where} in the unit (connection refused)`,
      code: AgentErrorCode.TunnelRefused,
    };
  }
  const code = codes[0] ?? "an unknown error";
  const why =
    code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME"
      ? `the host of ${where} did not resolve in the unit (${code})`
      : code === "ETIMEDOUT"
        ? `connecting to ${where} timed out after ${DIAL_TIMEOUT_MS / 1000} s`
        : `${where} is unreachable from the unit (${code})`;
  return { error: why, code: AgentErrorCode.TunnelUnreachable };
}

/** Connects to host:port within DIAL_TIMEOUT_MS; the socket stays half-open when the target ends first. */
function dialOnce(host: string, port: number, deadline: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const target = connect({ host, port, allowHalfOpen: true, noDelay: true });
    const timer = setTimeout(
      () => target.destroy(Object.assign(new Error("timed out"), { code: "ETIMEDOUT" })),
      Math.max(deadline - Date.now(), 0),
    );
    const failed = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    target.once("error", failed);
    target.once("connect", () => {
      clearTimeout(timer);
      target.off("error", failed);
      resolve(target);
    });
  });
}

/**
 * Connects to the target. `localhost` is 127.0.0.1, then ::1 when nothing listens there (a server on
 * the IPv6 loopback only); a name is resolved by the unit's resolver (its policy applies), an address
 * is dialed as it is.
 */
async function dial(host: string, port: number): Promise<Socket> {
  const deadline = Date.now() + DIAL_TIMEOUT_MS;
  if (!isLocalhost(host)) return dialOnce(host, port, deadline);
  try {
    return await dialOnce("127.0.0.1", port, deadline);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ECONNREFUSED") throw err;
    return dialOnce("::1", port, deadline).catch(() => Promise.reject(err));
  }
}

/**
 * Joins the host's connection and the target's: bytes both ways with backpressure (pipe), an end of
 * stream passed on as one. An error on either side, or the host's connection closing, ends both; the
 * target closing cleanly leaves the host's side to finish writing what it still holds.
 */
function splice(host: Socket, target: Socket): void {
  target.on("error", () => host.destroy());
  host.on("error", () => target.destroy());
  host.on("close", () => target.destroy());
  target.on("close", (hadError) => {
    if (hadError) host.destroy();
  });
  host.pipe(target);
  target.pipe(host);
}

export class Tunnels {
  private readonly open = new Set<Socket>();

  /** GET /tunnel (upgrade: ums-tcp). */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, q: URLSearchParams): void {
    if ((req.headers.upgrade ?? "").toLowerCase() !== TUNNEL_UPGRADE || head.length > 0) {
      rejectUpgrade(socket, 400, validation([`upgrade: must be ${TUNNEL_UPGRADE}, with no data before the 101`]));
      return;
    }
    const host = tunnelHost(q.get("host") ?? "");
    const portText = q.get("port") ?? "";
    const port = /^\d{1,5}$/.test(portText) ? Number(portText) : Number.NaN;
    const errors: string[] = [];
    if (host === null) errors.push("host: must be a host name or an IP address");
    if (!tunnelPort(port)) errors.push("port: must be an integer from 1 to 65535");
    if (host === null || errors.length > 0) {
      rejectUpgrade(socket, 400, validation(errors));
      return;
    }
    const client = socket as Socket;
    dial(host, port).then(
      (target) => {
        if (client.destroyed) {
          target.destroy();
          return;
        }
        const reached = joinHostPort(target.remoteAddress ?? host, target.remotePort ?? port);
        client.write(
          "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n" +
            `Upgrade: ${TUNNEL_UPGRADE}\r\n${TUNNEL_TARGET_HEADER}: ${reached}\r\n\r\n`,
        );
        this.open.add(client);
        client.once("close", () => this.open.delete(client));
        splice(client, target);
      },
      (err: NodeJS.ErrnoException) => {
        if (!client.destroyed) rejectUpgrade(socket, 502, failure(err, joinHostPort(host, port)));
      },
    );
  }

  close(): void {
    for (const s of this.open) s.destroy();
    this.open.clear();
  }
}
