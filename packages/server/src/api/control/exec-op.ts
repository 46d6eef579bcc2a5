import { ErrorCode, parseClientControl } from "@ums/protocol";
import type WebSocket from "ws";
import { ApiError } from "../errors.js";
import { agentExecQuery, ExecQuery, type ExecQueryValue } from "../exec/query.js";
import { leasedWebsocket } from "../unit-access/websockets.js";
import { validate } from "../validation.js";
import type { OpArgs } from "./envelope.js";
import { failOp, type OpDeps } from "./op-deps.js";
import type { OpContext, OpHandle, OpStarter } from "./session.js";
import { HIGH_WATER, LOW_WATER } from "./transport.js";

// The `exec` op of the control websocket: one exec session through the agent's exec websocket, the
// same one `/exec` joins (spec 4.3), with the same frames out (session_info, stream-id frames or raw
// TTY bytes, the exit frame or message). What the public clients send in control mode differs from
// a plain `/exec` websocket, and is translated (clientFrame); the op ends with
// `op.complete {exitCode}` once the agent closes the session.

/**
 * How a client frames a pipe's stdin in an exec op. The two public clients differ, and their
 * op.starts tell them apart: the Go client names the program in `path` beside `cmd` (or attaches
 * with `id`) and sends stdin as raw bytes; the JS client sends neither, and frames stdin as the
 * /exec websocket does, the stream id 0 first (its OpConn.write). So: `raw` with `path` or `id`,
 * `stream-id` without.
 */
export type StdinFraming = "raw" | "stream-id";

export function stdinFraming(args: OpArgs): StdinFraming {
  return args.path !== undefined || args.id !== undefined ? "raw" : "stream-id";
}

/** Where an exec op goes in the agent: a new session (`/exec?…`) or an attach (`/exec/{id}`). */
export function execTarget(args: OpArgs): { path: string; tty: boolean | undefined } {
  const id = args.id;
  if (id !== undefined) {
    if (typeof id !== "string" || !/^\d{1,9}$/.test(id)) throw ApiError.validation(["id: must be a session id"]);
    // The session's own mode rules (its session_info says it); `tty` as the client believes it.
    return { path: `/exec/${id}`, tty: args.tty === undefined ? undefined : args.tty === "true" };
  }
  // The query's own schema and rules (spec 4.3), as `/exec` checks them.
  const q = validate<ExecQueryValue>(ExecQuery, { ...args }, "querystring");
  return { path: `/exec?${agentExecQuery(q)}`, tty: q.tty ?? false };
}

/**
 * A client's binary frame as the agent's exec websocket takes it. In control mode the Go client
 * sends a pipe's stdin as raw bytes (no stream id) and EOF as the one byte 4; the JS client sends
 * stdin with its stream id (StdinFraming) and resize and signal messages as binary JSON. The agent
 * takes stdin as [0, bytes…], EOF as [4], and control messages as text frames.
 */
export function clientFrame(
  frame: Buffer,
  tty: boolean,
  framing: StdinFraming = "raw",
): { data: Buffer | string; binary: boolean } {
  if (frame[0] === 0x7b && frame.length <= 4096) {
    const text = frame.toString("utf8");
    if (parseClientControl(text)) return { data: text, binary: false };
  }
  if (tty || framing === "stream-id") return { data: frame, binary: true };
  if (frame.length === 1 && frame[0] === 4) return { data: frame, binary: true };
  return { data: Buffer.concat([Buffer.from([0]), frame]), binary: true };
}

/** The exit code a frame from the agent reports, if it is an exit (a pipe's [3, code], a TTY's exit message). */
export function exitOf(data: Buffer, binary: boolean): number | undefined {
  if (binary) return data.length === 2 && data[0] === 3 ? (data[1] as number) : undefined;
  if (data.length > 256 || !data.includes('"exit"')) return undefined;
  try {
    const m = JSON.parse(data.toString("utf8")) as { type?: unknown; exit_code?: unknown };
    return m.type === "exit" && typeof m.exit_code === "number" ? m.exit_code : undefined;
  } catch {
    return undefined;
  }
}

/** The exit code an exec websocket's close code carries (protocol closeCodeForExit), if any. */
export function exitOfClose(code: number): number | undefined {
  if (code === 1000) return 0;
  if (code >= 4000 && code <= 4255) return code - 4000;
  return undefined;
}

export function execOp(deps: OpDeps): OpStarter {
  return (ctx) => {
    let target: ReturnType<typeof execTarget>;
    try {
      target = execTarget(ctx.args);
    } catch (err) {
      failOp(ctx, deps, err);
      return {};
    }
    const run = new ExecRun(ctx, target.tty ?? false, stdinFraming(ctx.args));
    run.open(deps, target.path).catch((err) => failOp(ctx, deps, err));
    return run;
  };
}

class ExecRun implements OpHandle {
  private agent: WebSocket | null = null;
  private pending: Array<{ data: Buffer | string; binary: boolean }> = [];
  private pendingBytes = 0;
  private exitCode: number | undefined;

  constructor(
    private readonly ctx: OpContext,
    private tty: boolean,
    private readonly framing: StdinFraming,
  ) {}

  async open(deps: OpDeps, path: string): Promise<void> {
    const lease = await deps.leaseUnit();
    if (this.ctx.signal.aborted) {
      lease.release();
      return;
    }
    const agent = await leasedWebsocket(lease, path);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      lease.release();
    };
    agent.on("error", () => agent.terminate());
    agent.on("close", (code) => {
      release();
      this.closed(code);
    });
    if (this.ctx.signal.aborted) {
      agent.close(1000, "released");
      return;
    }
    this.ctx.signal.addEventListener("abort", () => {
      if (agent.readyState === agent.OPEN || agent.readyState === agent.CONNECTING) agent.close(1000, "released");
    });
    agent.on("message", (data: Buffer, binary) => this.fromAgent(agent, data, binary));
    this.agent = agent;
    for (const f of this.pending.splice(0)) this.toAgent(f.data, f.binary);
    this.pendingBytes = 0;
    this.ctx.resumeInput();
    agent.resume();
  }

  data(frame: Buffer): void {
    const f = clientFrame(frame, this.tty, this.framing);
    if (this.agent) {
      this.toAgent(f.data, f.binary);
      return;
    }
    // Stdin sent right after op.start waits for the session (and stops being read past a bound).
    this.pending.push(f);
    this.pendingBytes += f.data.length;
    if (this.pendingBytes > HIGH_WATER) this.ctx.pauseInput();
  }

  text(text: string): void {
    // Resize, signal, stdin_eof: the agent parses them, and ignores what it does not know.
    if (this.agent) this.toAgent(text, false);
    else this.pending.push({ data: text, binary: false });
  }

  private toAgent(data: Buffer | string, binary: boolean): void {
    const agent = this.agent;
    if (!agent || agent.readyState !== agent.OPEN) return;
    agent.send(data, { binary }, () => {
      if (agent.bufferedAmount <= LOW_WATER) this.ctx.resumeInput();
    });
    if (agent.bufferedAmount > HIGH_WATER) this.ctx.pauseInput();
  }

  private fromAgent(agent: WebSocket, data: Buffer, binary: boolean): void {
    if (!binary && this.exitCode === undefined) {
      // An attach learns the session's mode from its session_info (spec 2.8).
      if (data.length < 4096 && data.includes('"session_info"')) {
        try {
          const info = JSON.parse(data.toString("utf8")) as { type?: unknown; tty?: unknown };
          if (info.type === "session_info" && typeof info.tty === "boolean") this.tty = info.tty;
        } catch {}
      }
    }
    const exit = exitOf(data, binary);
    if (exit !== undefined) this.exitCode = exit;
    this.ctx.send(binary ? data : data.toString("utf8"));
    if (this.ctx.backlogged() && !agent.isPaused) {
      agent.pause();
      this.ctx
        .drained()
        .then(() => {
          if (agent.readyState === agent.OPEN) agent.resume();
        })
        .catch(() => agent.terminate());
    }
  }

  private closed(code: number): void {
    const exitCode = this.exitCode ?? exitOfClose(code);
    if (exitCode === undefined) {
      this.ctx.fail({
        error: `the unit's agent ended the session without an exit status (close code ${code})`,
        code: ErrorCode.UnitUnavailable,
        status: 502,
      });
    } else this.ctx.complete({ exitCode });
  }
}
