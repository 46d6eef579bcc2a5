// The exec wire format (spec 4.3, 2.8, 6.5), the one declaration the agent, ums serve and the SDK use.
// Non-TTY binary frames (websocket messages, or the chunks of an HTTP exec response) start with a stream
// id: client → agent 0 stdin data, 4 stdin EOF; agent → client 1 stdout, 2 stderr, 3 exit (the code in
// the next byte). TTY sessions send raw bytes without a stream id. Text frames carry JSON control
// messages. Dependency-free and platform-neutral (Uint8Array), so the agent's bundle and a browser can
// import it alone.

export const StreamId = {
  Stdin: 0,
  Stdout: 1,
  Stderr: 2,
  Exit: 3,
  StdinEof: 4,
} as const;
export type StreamId = (typeof StreamId)[keyof typeof StreamId];

export type OutputStream = typeof StreamId.Stdout | typeof StreamId.Stderr;

export function encodeFrame(stream: StreamId, payload?: Uint8Array): Uint8Array {
  const frame = new Uint8Array(1 + (payload?.length ?? 0));
  frame[0] = stream;
  if (payload) frame.set(payload, 1);
  return frame;
}

/** The exit frame is exactly two bytes: [3, code]; codes above 255 are reported modulo 256 as a shell does. */
export function encodeExitFrame(code: number): Uint8Array {
  return Uint8Array.of(StreamId.Exit, code & 0xff);
}

export interface DecodedFrame<T extends Uint8Array = Uint8Array> {
  stream: number;
  payload: T;
}

/** Splits a frame into stream id and payload (a view of the frame: a Buffer gives a Buffer); null if empty. */
export function decodeFrame<T extends Uint8Array>(frame: T): DecodedFrame<T> | null {
  if (frame.length === 0) return null;
  return { stream: frame[0] as number, payload: frame.subarray(1) as T };
}

// Between the host and a unit's agent a non-TTY exec may also run as one plain HTTP request
// (`POST /exec`, docs/ARCHITECTURE.md section 10): its answer is a byte stream, where a chunk's edges
// are not kept, so each frame goes with its length first (4 bytes, big-endian).

/** The 4-byte length of a frame, to write before it in a plain HTTP exec's answer. */
export function frameLength(frame: Uint8Array): Uint8Array {
  const n = frame.length;
  return Uint8Array.of(n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

/** Reads the length-prefixed frames of a plain HTTP exec's answer from its chunks, as they come. */
export class FrameReader {
  private pending: Uint8Array = new Uint8Array(0);

  /** The frames completed by this chunk, in order (views of the chunks where they fit in one). */
  push(chunk: Uint8Array): Uint8Array[] {
    let buf = chunk;
    if (this.pending.length > 0) {
      buf = new Uint8Array(this.pending.length + chunk.length);
      buf.set(this.pending);
      buf.set(chunk, this.pending.length);
    }
    const frames: Uint8Array[] = [];
    let at = 0;
    while (buf.length - at >= 4) {
      const n =
        (((buf[at] as number) << 24) >>> 0) +
        ((buf[at + 1] as number) << 16) +
        ((buf[at + 2] as number) << 8) +
        (buf[at + 3] as number);
      if (buf.length - at - 4 < n) break;
      frames.push(buf.subarray(at + 4, at + 4 + n));
      at += 4 + n;
    }
    this.pending = buf.slice(at);
    return frames;
  }

  /** Bytes of a frame not yet complete. */
  get buffered(): number {
    return this.pending.length;
  }
}

/** Close code of an exec websocket after the process exited: 1000 for 0, 4000 + code (capped at 255) otherwise. */
export function closeCodeForExit(code: number): number {
  return code === 0 ? 1000 : 4000 + Math.min(Math.max(code, 0), 255);
}

// Text (JSON) control messages, agent → client.

/** The first message of every exec websocket (spec 2.8). */
export interface SessionInfoMessage {
  type: "session_info";
  session_id: number;
  command: string;
  created: string;
  cols: number;
  rows: number;
  tty: boolean;
  is_owner: boolean;
}

/** A port a process of the unit started or stopped listening on (spec 6.5). */
export interface PortMessage {
  type: "port_opened" | "port_closed";
  port: number;
  address: string;
  pid: number;
}

/** The end of a TTY session (pipes send the exit frame instead). */
export interface ExitMessage {
  type: "exit";
  exit_code: number;
}

/** Keepalive, at least every 20 s on every exec websocket. */
export interface PingMessage {
  type: "ping";
}

export type AgentControl = SessionInfoMessage | PortMessage | ExitMessage | PingMessage;

// Text (JSON) control messages, client → agent.

export type ClientControl =
  | { type: "resize"; cols: number; rows: number }
  | { type: "signal"; signal: string }
  | { type: "stdin_eof" };

/** Parses a client text frame; unknown or malformed messages give null and are ignored. */
export function parseClientControl(text: string): ClientControl | null {
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof msg !== "object" || msg === null) return null;
  const m = msg as Record<string, unknown>;
  if (m.type === "resize") {
    const cols = Number(m.cols);
    const rows = Number(m.rows);
    if (!isValidSize(cols) || !isValidSize(rows)) return null;
    return { type: "resize", cols, rows };
  }
  if (m.type === "signal" && typeof m.signal === "string") return { type: "signal", signal: m.signal };
  if (m.type === "stdin_eof") return { type: "stdin_eof" };
  return null;
}

/** A terminal size (cols, rows) the agent accepts. */
export function isValidSize(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && n <= 65535;
}
