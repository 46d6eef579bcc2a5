import type { Socket } from "node:net";
import { checkTunnelTarget, ErrorCode, type TunnelAnswer } from "@ums/protocol";
import type { UnitLease } from "../../node/unit-node.js";
import type { TunnelCount } from "../tunnels/count.js";
import { failureAnswer } from "../tunnels/open.js";
import { CLOSE_GRACE_MS } from "../tunnels/relay.js";
import { argText, type OpArgs } from "./envelope.js";
import type { OpDeps } from "./op-deps.js";
import type { OpContext, OpHandle, OpStarter } from "./session.js";
import { HIGH_WATER } from "./transport.js";

// The `proxy` op of the control websocket: the TCP tunnel of `/proxy` (packages/protocol/src/tunnel.ts)
// on a pooled control connection, as the Go client's port forwarding opens it when control is offered:
// `{"type":"start","operation":"proxy","params":{"host","port","keep_alive"}}` (envelope.ts reads it
// as an op.start). The connection is made by the unit's agent inside the unit, never by the host
// (docs/SECURITY.md), and counts towards the unit's open tunnels (tunnels/count.ts) like a `/proxy`.
//
// - The answer is one text frame of bare JSON, as `/proxy` answers: `{"status":"connected","target"}`,
//   or `{"status":"error",…,"code"}`, which ends the op (no op.error follows: the Go client reads one
//   answer, then releases the connection to its pool, where a stray envelope would be read as the
//   next op's answer).
// - Then binary frames carry the bytes both ways; an empty one ends the client's side (the target
//   reads end of stream and may still answer). Text frames are not the connection's and are ignored.
// - `release` ends it: the target's side is ended after the bytes already written (and the
//   connection cut once it ends too, or after CLOSE_GRACE_MS); nothing more of it is sent, and the
//   control connection is idle again.
// - The target ended its side, every byte of it sent: in the prefixed framing `op.complete`; in the
//   plain framing (the Go client, which reads nothing but binary frames and the websocket's close
//   during a proxy) the control connection is closed 1000. A connection to the agent that broke
//   without an end: `op.error` (UMS_UNIT_UNAVAILABLE), or in the plain framing a close 1011.

/** `host` and `port` as a tunnel takes them, or every problem, each naming its field. */
export function proxyTarget(args: OpArgs): { host: string; port: number } | { errors: string[] } {
  const rawPort = argText(args, "port");
  // Args are text: digits are the port's number, anything else is refused as it is.
  const port = rawPort !== undefined && /^\d{1,5}$/.test(rawPort) ? Number(rawPort) : rawPort;
  const target = checkTunnelTarget(argText(args, "host"), port);
  return target.ok ? target.value : { errors: target.errors };
}

export function proxyOp(deps: OpDeps, tunnels: TunnelCount): OpStarter {
  return (ctx) => {
    const target = proxyTarget(ctx.args);
    if ("errors" in target) {
      answerEnd(ctx, { status: "error", errors: target.errors, code: ErrorCode.Validation });
      return {};
    }
    const run = new ProxyRun(ctx);
    run.open(deps, tunnels, target.host, target.port).catch((err: unknown) => {
      answerEnd(ctx, failureAnswer(err, deps.logFault));
    });
    return run;
  };
}

/** The op's one answer; an error answer ends it. */
function answerEnd(ctx: OpContext, answer: TunnelAnswer): void {
  ctx.send(JSON.stringify(answer));
  if (answer.status !== "connected") ctx.end();
}

class ProxyRun implements OpHandle {
  private socket: Socket | null = null;
  /** What the client sent before the target was connected (it waits, bounded by HIGH_WATER). */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private waitingDrain = false;

  constructor(private readonly ctx: OpContext) {}

  async open(deps: OpDeps, tunnels: TunnelCount, host: string, port: number): Promise<void> {
    const lease: UnitLease = await deps.leaseUnit();
    let give: () => void;
    try {
      // At the limit: the refusal is the op's answer, as any failure to open (proxyOp).
      give = tunnels.reserve(lease.unit);
    } catch (err) {
      lease.release();
      throw err;
    }
    const done = () => {
      lease.release();
      give();
    };
    if (this.ctx.signal.aborted) return done();
    let tunnel: Awaited<ReturnType<UnitLease["agent"]["tunnel"]>>;
    try {
      tunnel = await lease.agent.tunnel(host, port);
    } catch (err) {
      done();
      throw err;
    }
    const socket = tunnel.socket;
    socket.once("close", done);
    if (this.ctx.signal.aborted) {
      socket.destroy();
      return;
    }
    this.relay(socket);
    this.ctx.send(JSON.stringify({ status: "connected", target: tunnel.target } satisfies TunnelAnswer));
    this.socket = socket;
    for (const frame of this.pending.splice(0)) this.data(frame);
    this.pendingBytes = 0;
    this.ctx.resumeInput();
  }

  data(frame: Buffer): void {
    const socket = this.socket;
    if (!socket) {
      this.pending.push(frame);
      this.pendingBytes += frame.length;
      if (this.pendingBytes > HIGH_WATER) this.ctx.pauseInput();
      return;
    }
    if (socket.writableEnded || socket.destroyed) return;
    if (frame.length === 0) {
      socket.end();
      return;
    }
    if (!socket.write(frame) && !this.waitingDrain) {
      this.waitingDrain = true;
      this.ctx.pauseInput();
      socket.once("drain", () => {
        this.waitingDrain = false;
        this.ctx.resumeInput();
      });
    }
  }

  /** Text frames are not part of the connection (as on `/proxy`). */
  text(): void {}

  /** The target's bytes to the client, bounded; its end or break ends the op. */
  private relay(socket: Socket): void {
    const ctx = this.ctx;
    const plain = ctx.framing === "plain";
    let graceTimer: NodeJS.Timeout | undefined;
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => {
      if (ctx.signal.aborted) return; // released: what the target still sends is dropped
      ctx.send(chunk);
      if (ctx.backlogged() && !socket.isPaused()) {
        socket.pause();
        ctx
          .drained()
          .then(() => socket.resume())
          .catch(() => socket.destroy());
      }
    });
    socket.once("end", () => {
      if (plain) ctx.closeConnection(1000, "the target closed the connection");
      else ctx.complete();
    });
    socket.once("close", () => {
      clearTimeout(graceTimer);
      if (plain) ctx.closeConnection(1011, "the connection to the target broke");
      else
        ctx.fail({
          error: "the connection to the target broke",
          code: ErrorCode.UnitUnavailable,
          status: 502,
        });
    });
    ctx.signal.addEventListener("abort", () => {
      // Released, or the control connection closed: the target's side is ended after what was
      // written, and the connection cut once the target ends too, or after the grace.
      if (socket.destroyed) return;
      socket.resume();
      if (socket.readableEnded) {
        socket.destroy();
        return;
      }
      if (!socket.writableEnded) socket.end();
      socket.once("end", () => socket.destroy());
      graceTimer = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
      graceTimer.unref();
    });
  }
}
