import { ErrorCode } from "@ums/protocol";
import { type Envelope, encodeEnvelope, type Framing, type OpArgs, parseText } from "./envelope.js";

// The control websocket's state machine (docs/API.md, GET /v1/units/{name}/control; docs/ARCHITECTURE.md section 10): one op at a time, as the
// public clients use a pooled connection. Idle → `op.start` → the op runs, its data frames pass both
// ways → `op.complete` or `op.error` (or the client's `release`) → idle again, ready for the next op.
// No timers and no sockets here: the transport (transport.ts) and the ops (exec-op.ts, fs-ops.ts) are
// given; everything the client sends is checked, and a problem is an `op.error` naming it, never a throw.

/** A failed op, as `op.error`'s args say it (`error` and `code` always; the rest as the API's answers). */
export interface OpFailure {
  readonly error: string;
  readonly code: string;
  readonly status?: number;
  readonly path?: string;
  readonly errors?: readonly string[];
}

/** What the session writes to and reads from: the client's websocket (transport.ts). */
export interface ControlTransport {
  send(data: string | Buffer): void;
  /** The client is behind on reading: producers wait for `drained()`. */
  backlogged(): boolean;
  drained(): Promise<void>;
  pauseInput(): void;
  resumeInput(): void;
  /** Closes the connection with a websocket close `code` (RFC 6455 section 7.4). */
  close(code: number, reason: string): void;
}

/** What a running op may do; every call is a no-op once the op has ended. */
export interface OpContext {
  readonly op: string;
  readonly args: OpArgs;
  readonly framing: Framing;
  /** Aborted when the op ends for any reason (completed, failed, released, connection closed). */
  readonly signal: AbortSignal;
  /** One data frame of the op: text (a string) or binary (a Buffer). */
  send(data: string | Buffer): void;
  backlogged(): boolean;
  drained(): Promise<void>;
  /** Stops reading the client's frames (back-pressure) until `resumeInput`, or the op's end. */
  pauseInput(): void;
  resumeInput(): void;
  complete(args?: Readonly<Record<string, unknown>>): void;
  fail(failure: OpFailure): void;
  /** Ends the op with nothing more sent (its last data frame said how it ended, as a proxy's answer does). */
  end(): void;
  /** Ends the op by closing the connection (for a client that reads no other end of an op's stream). */
  closeConnection(code: number, reason: string): void;
}

/** A running op's handlers of the client's data frames. */
export interface OpHandle {
  /** A binary frame. */
  data?(frame: Buffer): void;
  /** A text frame that is no envelope (e.g. an exec's resize or signal). */
  text?(text: string): void;
}

/** Starts an op; it must not throw (a problem with the args is `ctx.fail`). */
export type OpStarter = (ctx: OpContext) => OpHandle;

interface Running {
  readonly ctx: OpContext;
  readonly controller: AbortController;
  readonly framing: Framing;
  handle: OpHandle;
  inputPaused: boolean;
}

export class ControlSession {
  private current: Running | null = null;
  private closed = false;
  /** How many ops were started (for the connection's log line). */
  started = 0;

  constructor(
    private readonly transport: ControlTransport,
    private readonly ops: ReadonlyMap<string, OpStarter>,
    /** A fault of an op (a bug): logged by the caller, answered as an internal error. */
    private readonly onFault: (err: unknown) => void = () => {},
  ) {}

  /** Whether an op is running. */
  get busy(): boolean {
    return this.current !== null;
  }

  /** A text frame from the client. */
  text(text: string): void {
    if (this.closed) return;
    const parsed = parseText(text);
    if (parsed.kind === "data") {
      if (this.current) this.guard(this.current, () => this.current?.handle.text?.(text));
      else
        this.protocolError(
          "prefixed",
          'expected an envelope such as control:{"type":"op.start","op":"exec","args":{…}}; no operation is running',
        );
      return;
    }
    if (parsed.kind === "invalid") {
      this.protocolError(this.current?.framing ?? parsed.framing, parsed.problem);
      return;
    }
    const { envelope, framing } = parsed;
    switch (envelope.type) {
      case "op.start":
        if (this.current) {
          this.protocolError(this.current.framing, "op.start: an operation is already running (one at a time)");
        } else this.start(envelope, framing);
        return;
      case "release":
        // The client is done with the op (and the connection goes back to its pool): whatever still
        // runs is stopped, and nothing more of it is sent.
        if (this.current) this.end(this.current);
        return;
      default:
        this.protocolError(
          this.current?.framing ?? framing,
          `type: unknown envelope type '${envelope.type.slice(0, 64)}' (op.start or release)`,
        );
    }
  }

  /** A binary frame from the client. */
  binary(frame: Buffer): void {
    if (this.closed) return;
    if (this.current) this.guard(this.current, () => this.current?.handle.data?.(frame));
    else this.protocolError("prefixed", "a data frame came with no operation running; send op.start first");
  }

  /** The connection closed: the running op, if any, is stopped. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.current) this.end(this.current);
  }

  private start(envelope: Envelope, framing: Framing): void {
    const name = envelope.op;
    const starter = name === undefined ? undefined : this.ops.get(name);
    if (!starter) {
      const known = [...this.ops.keys()].join(", ");
      this.transport.send(
        encodeEnvelope(framing, "op.error", {
          error:
            name === undefined
              ? `op: is required (one of ${known})`
              : `op: unknown operation '${name.slice(0, 64)}' (one of ${known})`,
          code: ErrorCode.ControlUnknownOp,
        }),
      );
      return;
    }
    this.started++;
    const controller = new AbortController();
    const live = () => this.current === running && !this.closed;
    const ctx: OpContext = {
      op: name as string,
      args: envelope.args,
      framing,
      signal: controller.signal,
      send: (data) => {
        if (live()) this.transport.send(data);
      },
      backlogged: () => this.transport.backlogged(),
      drained: () => this.transport.drained(),
      pauseInput: () => {
        if (!live() || running.inputPaused) return;
        running.inputPaused = true;
        this.transport.pauseInput();
      },
      resumeInput: () => {
        if (!running.inputPaused) return;
        running.inputPaused = false;
        this.transport.resumeInput();
      },
      complete: (args) => {
        if (!live()) return;
        this.transport.send(encodeEnvelope(framing, "op.complete", args));
        this.end(running);
      },
      fail: (failure) => {
        if (!live()) return;
        this.transport.send(encodeEnvelope(framing, "op.error", { ...failure }));
        this.end(running);
      },
      end: () => {
        if (live()) this.end(running);
      },
      closeConnection: (code, reason) => {
        if (!live()) return;
        this.end(running);
        this.transport.close(code, reason);
      },
    };
    const running: Running = { ctx, controller, framing, handle: {}, inputPaused: false };
    this.current = running;
    this.guard(running, () => {
      running.handle = starter(ctx);
    });
  }

  /** Runs an op's handler; a throw is the op's failure (and a fault to log), never the connection's. */
  private guard(running: Running, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.onFault(err);
      running.ctx.fail({ error: "internal error; see the server log", code: ErrorCode.Internal, status: 500 });
    }
  }

  private end(running: Running): void {
    if (this.current !== running) return;
    this.current = null;
    running.ctx.resumeInput();
    running.controller.abort();
  }

  /** A client's mistake: the running op (if any) ends with an op.error naming it; idle, one op.error. */
  private protocolError(framing: Framing, problem: string): void {
    const failure: OpFailure = { error: problem, code: ErrorCode.ControlProtocol, status: 400 };
    if (this.current) this.current.ctx.fail(failure);
    else this.transport.send(encodeEnvelope(framing, "op.error", { ...failure }));
  }
}
