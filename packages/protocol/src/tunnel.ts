// The TCP tunnel (`GET /v1/units/{name}/proxy`, websocket) and the port watch (`GET
// /v1/units/{name}/ports/watch`, websocket, spec 6.5): the messages on their wires, one declaration for
// the agent, ums serve and the SDK. Dependency-free and platform-neutral, like exec.ts.
//
// The tunnel, as the public Sprites clients speak it:
//   1. the client opens the websocket and sends one text message, JSON `{"host": …, "port": …}`;
//   2. the server answers one text message: `{"status":"connected","target":"<address>:<port>"}` once
//      the unit's agent has connected to that address from inside the unit, or
//      `{"status":"error","error"|"errors",…,"code"}` and closes the websocket;
//   3. then binary messages carry the bytes both ways. An empty binary message from the client ends
//      its side (the target reads end of stream and may still answer); the websocket closes once the
//      target has ended its side (after every byte it sent), or when either end closes it.
// An addition of ums: the target may instead come in the upgrade's query (`?host=…&port=…`); the agent
// then connects while the upgrade completes, no first message is sent, and the answer comes first.

/** What a client asks the tunnel to connect to (the clients' `ProxyInitMessage`). */
export interface TunnelOpen {
  host: string;
  port: number;
}

/** The server's answer to a `TunnelOpen` (the clients read `status`; anything but "connected" is a failure). */
export type TunnelAnswer =
  | { status: "connected"; target: string }
  | { status: "error"; error: string; code: string }
  | { status: "error"; errors: string[]; code: string };

/** The upgrade protocol of the host's connection to the agent's end of a tunnel (raw bytes after the 101). */
export const TUNNEL_UPGRADE = "ums-tcp";
/** The agent's 101 names the address it connected to in this header. */
export const TUNNEL_TARGET_HEADER = "x-ums-target";

/** The host a client names when it names none (the clients' default too): the unit's own loopback. */
export const DEFAULT_TUNNEL_HOST = "localhost";

const LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;
const OCTET = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const IPV4 = new RegExp(`^${OCTET}(?:\\.${OCTET}){3}$`);
const IPV6 = /^[0-9A-Fa-f:.]{2,45}$/;

/**
 * Whether `host` is a DNS name (RFC 1123 labels, at most 253 characters, one trailing dot allowed)
 * or an IPv4 or IPv6 literal (an IPv6 literal may come in brackets; no zone). Checked before anything
 * resolves or dials it.
 */
export function tunnelHost(host: string): string | null {
  if (host.startsWith("[") && host.endsWith("]")) {
    const inner = host.slice(1, -1);
    return inner.includes(":") && IPV6.test(inner) ? inner : null;
  }
  if (host.includes(":")) return IPV6.test(host) ? host : null;
  const name = host.endsWith(".") ? host.slice(0, -1) : host;
  if (name.length === 0 || name.length > 253) return null;
  const labels = name.split(".");
  // All digits is an IPv4 address or nothing (no top-level domain is numeric, RFC 3696 section 2).
  if (/^\d+$/.test(labels.at(-1) ?? "")) return IPV4.test(name) ? name : null;
  return labels.every((l) => LABEL.test(l)) ? name : null;
}

/** Whether `port` is a TCP port a tunnel may connect to. */
export function tunnelPort(port: unknown): port is number {
  return typeof port === "number" && Number.isInteger(port) && port >= 1 && port <= 65535;
}

export type TunnelOpenResult = { ok: true; value: TunnelOpen } | { ok: false; errors: string[] };

/**
 * Parses a tunnel's first message. A missing or empty `host` is `localhost` (as the clients default);
 * every problem is listed, each naming its field.
 */
export function parseTunnelOpen(text: string): TunnelOpenResult {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return { ok: false, errors: ['the first message must be JSON: {"host": string, "port": integer}'] };
  }
  if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
    return { ok: false, errors: ['the first message must be a JSON object: {"host": string, "port": integer}'] };
  }
  const { host, port } = msg as { host?: unknown; port?: unknown };
  return checkTunnelTarget(host, port);
}

/**
 * A tunnel's target however it came (the first message, the upgrade's query, a control op's args): a
 * missing, null or empty `host` is `localhost` (as the clients default); every problem is listed,
 * each naming its field.
 */
export function checkTunnelTarget(rawHost: unknown, port: unknown): TunnelOpenResult {
  const errors: string[] = [];
  let host: string | null = DEFAULT_TUNNEL_HOST;
  if (rawHost !== undefined && rawHost !== null && rawHost !== "") {
    host = typeof rawHost === "string" ? tunnelHost(rawHost) : null;
    if (host === null) errors.push("host: must be a host name or an IP address");
  }
  if (port === undefined) errors.push("port: is required");
  else if (!tunnelPort(port)) errors.push("port: must be an integer from 1 to 65535");
  if (errors.length > 0 || host === null) return { ok: false, errors };
  return { ok: true, value: { host, port: port as number } };
}

/** `host:port`, with an IPv6 address in brackets. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** One listening port of a unit, in the port watch's first message. */
export interface ListeningPort {
  port: number;
  /** As in spec 6.5's messages: the URL the unit is reached at. */
  address: string;
  /** The process listening (0 when it could not be told). */
  pid: number;
}

/**
 * The first message of a port watch: the ports listening when it began (then `port_opened` and
 * `port_closed` messages, spec 6.5, exec.ts's `PortMessage`).
 */
export interface PortsMessage {
  type: "ports";
  ports: ListeningPort[];
}
