// Exec sessions over websockets (spec 4.3, 2.8): TTY or not, attach to a running one, list, kill.
// The frame format is @ums/protocol's exec.ts; `Commands.run` (HTTP exec) is the simpler path when
// neither a terminal nor a session that outlives the client is needed.

import { EventEmitter } from "node:events";
import type { AgentControl, ExecQuery, ExecSession as WireExecSession } from "@ums/protocol";
import { encodeFrame, StreamId } from "@ums/protocol/exec";
import type WebSocket from "ws";
import { addQuery, encodePath, type UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";
import { ConnectionError, errorFromResponse, SdkErrorCode, UmsError } from "./errors.js";
import { collectEvents } from "./ndjson.js";

export interface SessionOpenOpts {
  /** A pseudo-terminal: output is one stream of raw bytes, input goes to the terminal. */
  tty?: boolean | undefined;
  cols?: number | undefined;
  rows?: number | undefined;
  /** Send stdin (`write`, `end`); without it the process reads end of file. Default true. */
  stdin?: boolean | undefined;
  env?: Readonly<Record<string, string>> | undefined;
  cwd?: string | undefined;
  user?: "unit" | "root" | undefined;
  /** How long the process may run after the websocket closed, e.g. `30s`; TTY sessions default to until it exits. */
  maxRunAfterDisconnect?: string | undefined;
  /** Time limit of the connection's opening, in milliseconds (default: the client's). */
  timeoutMs?: number | undefined;
}

export interface SessionInfo {
  id: number;
  command: string;
  createdAt: Date;
  isActive: boolean;
  lastActivity: Date;
  tty: boolean;
  workdir: string;
  bytesPerSecond: number;
}

export interface KillEvent {
  type: string;
  [key: string]: unknown;
}

/**
 * One exec websocket. Events: `data` (stream "stdout" | "stderr", bytes; a TTY sends everything as
 * stdout), `info` (the session_info message). `exit` resolves with the exit code, or `null` when the
 * connection closed without one (detached, or the server went away).
 */
/** WebSocket.OPEN (ws is loaded only when a session is opened: a CLI start need not pay for it). */
const OPEN = 1;

export class ExecConnection extends EventEmitter<{
  data: [stream: "stdout" | "stderr", bytes: Buffer];
  info: [info: { sessionId: number; tty: boolean; cols: number; rows: number; isOwner: boolean }];
}> {
  #ws: WebSocket;
  #tty: boolean | undefined;
  #exitCode: number | null = null;
  #detached = false;
  /**
   * Output that came before anyone listened: a re-attach's replay (and a fast command's output)
   * arrives with the connection, before the caller's `await` returns and it adds its listener.
   * Handed to the first `data` listener.
   */
  #early: [stream: "stdout" | "stderr", bytes: Buffer][] | undefined = [];
  #sessionId: number | undefined;
  readonly exit: Promise<number | null>;

  /** @internal */
  constructor(ws: WebSocket, tty: boolean | undefined) {
    super();
    this.#ws = ws;
    this.#tty = tty;
    this.exit = new Promise((resolve) => {
      ws.on("close", (code) => {
        // A TTY's close code carries the exit (1000 for 0, 4000 + code) when no exit message came;
        // a close of our own (detach) carries none.
        if (this.#detached && this.#exitCode === null) return resolve(null);
        if (this.#exitCode === null && code === 1000 && this.#tty) this.#exitCode = 0;
        else if (this.#exitCode === null && code >= 4000 && code <= 4255) this.#exitCode = code - 4000;
        resolve(this.#exitCode);
      });
    });
    (this as unknown as NodeJS.EventEmitter).on("newListener", (event: string | symbol) => {
      if (event !== "data" || !this.#early) return;
      const early = this.#early;
      this.#early = undefined;
      // After the listener is added (newListener fires before it), in order: output arriving
      // meanwhile queues behind the early output.
      if (early.length > 0) {
        this.#pending = early;
        queueMicrotask(() => this.#flush());
      }
    });
    ws.on("message", (data, isBinary) => {
      const buf = data as Buffer;
      if (!isBinary) return this.#control(buf.toString("utf8"));
      if (this.#tty) return void this.#data("stdout", buf);
      const id = buf[0];
      if (id === StreamId.Stdout) this.#data("stdout", buf.subarray(1));
      else if (id === StreamId.Stderr) this.#data("stderr", buf.subarray(1));
      else if (id === StreamId.Exit) this.#exitCode = buf[1] ?? 0;
    });
    // A reset after opening: `exit` resolves with null (the close event follows).
    ws.on("error", () => {});
  }

  #pending: [stream: "stdout" | "stderr", bytes: Buffer][] | undefined;

  #data(stream: "stdout" | "stderr", bytes: Buffer): void {
    if (this.#early) this.#early.push([stream, bytes]);
    else if (this.#pending) this.#pending.push([stream, bytes]);
    else this.emit("data", stream, bytes);
  }

  /** Emits what came early, then what came while it waited for the microtask, in order. */
  #flush(): void {
    const pending = this.#pending ?? [];
    this.#pending = undefined;
    for (const [stream, bytes] of pending) this.emit("data", stream, bytes);
  }

  /** The session's id (known once `info` was emitted), for `attach` and `kill`. */
  get sessionId(): number | undefined {
    return this.#sessionId;
  }

  #control(text: string): void {
    let msg: AgentControl;
    try {
      msg = JSON.parse(text) as AgentControl;
    } catch {
      return;
    }
    if (msg.type === "session_info") {
      this.#sessionId = msg.session_id;
      this.#tty = msg.tty;
      this.emit("info", {
        sessionId: msg.session_id,
        tty: msg.tty,
        cols: msg.cols,
        rows: msg.rows,
        isOwner: msg.is_owner,
      });
    } else if (msg.type === "exit") {
      this.#exitCode = msg.exit_code;
    }
  }

  /** Input for the process (a TTY's keystrokes). */
  write(bytes: Uint8Array | string): void {
    const data = typeof bytes === "string" ? Buffer.from(bytes) : bytes;
    if (this.#ws.readyState !== OPEN) return;
    this.#ws.send(this.#tty ? data : encodeFrame(StreamId.Stdin, data), { binary: true });
  }

  /** End of input (non-TTY): the process reads end of file. */
  end(): void {
    if (this.#ws.readyState !== OPEN) return;
    if (this.#tty) this.#ws.send(JSON.stringify({ type: "stdin_eof" }));
    else this.#ws.send(encodeFrame(StreamId.StdinEof), { binary: true });
  }

  /** The terminal's new size. */
  resize(cols: number, rows: number): void {
    if (this.#ws.readyState === OPEN) this.#ws.send(JSON.stringify({ type: "resize", cols, rows }));
  }

  /** Closes this connection only; a TTY session keeps running (attach again by its id). */
  detach(): void {
    this.#detached = true;
    this.#ws.close(1000);
  }
}

/** `unit.sessions`: exec sessions over websockets (spec 4.3). */
export class Sessions {
  constructor(
    private readonly client: UmsClient,
    private readonly path: () => string,
  ) {}

  /** Starts a process on a websocket; resolves once the connection is open. */
  open(cmd: readonly string[], opts: SessionOpenOpts = {}): Promise<ExecConnection> {
    if (cmd.length === 0) throw new UmsError("cmd must name a program", SdkErrorCode.InvalidConfig);
    const query: Partial<Record<keyof ExecQuery, string | readonly string[] | undefined>> = {
      cmd,
      tty: opts.tty ? "true" : undefined,
      cols: opts.cols === undefined ? undefined : String(opts.cols),
      rows: opts.rows === undefined ? undefined : String(opts.rows),
      stdin: opts.stdin === false ? undefined : "true",
      env: Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`),
      dir: opts.cwd,
      user: opts.user,
      max_run_after_disconnect: opts.maxRunAfterDisconnect,
    };
    return this.#connect(`${this.path()}/exec`, query, opts.tty, opts.timeoutMs);
  }

  /** Attaches to a running session: its recent output is replayed, then it streams live. */
  attach(id: number, opts: { timeoutMs?: number | undefined } = {}): Promise<ExecConnection> {
    return this.#connect(`${this.path()}${encodePath`/exec/${String(id)}`}`, {}, undefined, opts.timeoutMs);
  }

  /** The unit's exec sessions (none when the unit is cold). */
  async list(opts: RequestOpts = {}): Promise<SessionInfo[]> {
    const list = await this.client.request<WireExecSession[]>("GET", `${this.path()}/exec`, {
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
    });
    return list.map((s) => ({
      id: s.id,
      command: s.command,
      createdAt: new Date(s.created),
      isActive: s.is_active,
      lastActivity: new Date(s.last_activity),
      tty: s.tty,
      workdir: s.workdir,
      bytesPerSecond: s.bytes_per_second,
    }));
  }

  /** Signals a session's process group and waits up to `timeoutSeconds` for it (spec 6.3 events). */
  async kill(
    id: number,
    opts: { signal?: string | undefined; timeoutSeconds?: number | undefined; timeoutMs?: number | undefined } = {},
  ): Promise<KillEvent[]> {
    const res = await this.client.open("POST", `${this.path()}${encodePath`/exec/${String(id)}`}/kill`, {
      timeoutMs: opts.timeoutMs,
      query: { signal: opts.signal, timeout: opts.timeoutSeconds },
    });
    return collectEvents<KillEvent>(res);
  }

  async #connect(
    path: string,
    query: Record<string, string | readonly string[] | undefined>,
    tty: boolean | undefined,
    timeoutMs: number | undefined,
  ): Promise<ExecConnection> {
    const url = new URL(this.client.config.baseUrl.replace(/^http/, "ws") + path);
    addQuery(url, query);
    const { default: WebSocket } = await import("ws");
    const ws = new WebSocket(url, {
      headers: { ...this.client.config.headers, authorization: `Bearer ${this.client.config.token}` },
      handshakeTimeout: (timeoutMs ?? this.client.config.timeoutMs) || undefined,
    });
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve(new ExecConnection(ws, tty)));
      ws.once("unexpected-response", (_req, res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {}
          reject(errorFromResponse(res.statusCode ?? 0, res.statusMessage ?? "", parsed, text));
          ws.terminate();
        });
      });
      ws.once("error", (err) =>
        reject(
          new ConnectionError(
            `websocket ${url.origin}${url.pathname} failed: ${err.message}`,
            SdkErrorCode.Connection,
            {
              cause: err,
            },
          ),
        ),
      );
    });
  }
}
