import type { ClientRequest } from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";

/**
 * How long the host waits on a unit's agent (issue #19 finding 8: unit root can stop or trace its
 * agent, and nothing the host does may then hang). Only the wait for the agent's first answer is
 * bounded: a response head, a websocket's 101. What streams after it (exec output, a log follow, a
 * file) may take as long as it takes.
 */
export interface AgentTimeouts {
  /** Until the connection to the agent's socket is made. */
  readonly connectMs: number;
  /** From the connection until the agent's first answer. */
  readonly answerMs: number;
}

export const DEFAULT_AGENT_TIMEOUTS: AgentTimeouts = Object.freeze({ connectMs: 5000, answerMs: 10_000 });

/** The agent missed a deadline of `AgentTimeouts`. */
export class AgentTimeoutError extends Error {
  constructor(
    readonly phase: "connect" | "answer",
    readonly ms: number,
    /** What was done about it, said after the fact (e.g. the node marked the unit unhealthy). */
    consequence?: string,
  ) {
    super(
      (phase === "connect"
        ? `could not connect to the unit's agent within ${seconds(ms)}`
        : `the unit's agent did not answer within ${seconds(ms)}`) + (consequence ? `; ${consequence}` : ""),
    );
  }
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/** Where and how a unit's agent is called, and who is told when it misses a deadline. */
export interface AgentEndpoint {
  /** The agent's Unix socket (the runtime's `agentSocket`). */
  readonly path: string;
  /**
   * Issue #15: how a connection to the agent is made when it is not the Unix socket on this host
   * (through a node's endpoint, node/remote/): `done` gets the socket once it leads to the agent.
   */
  readonly connect?: (done: (err: Error | null, socket?: Socket) => void) => void;
  /**
   * Issue #16: the device of the unit's files on this host (its rootfs), when the agent is on this
   * host: a large read may then come as the file's descriptor, checked to be on it (agent/fd-read.ts).
   */
  readonly filesDevice?: () => number | undefined;
  readonly timeouts: AgentTimeouts;
  /** Told of a missed deadline (the unit is unhealthy); returns the error the waiting call fails with. */
  timedOut(err: AgentTimeoutError): Error;
}

/**
 * A new connection to the endpoint's agent, as `createConnection` of node:http makes one: its Unix
 * socket here, returned; or (issue #15, `ep.connect`) given to `done` once made.
 */
export function connectEndpoint(
  ep: AgentEndpoint,
  done: (err: Error | null, socket: Duplex) => void = () => {},
): Socket {
  if (!ep.connect) return connect({ path: ep.path });
  ep.connect((err, socket) => done(err, socket as Duplex));
  // node:http takes no socket returned as one to wait for `done` (its createConnection contract).
  return undefined as unknown as Socket;
}

/** Sockets that lead to the agent only once their promise settles (`leadsToAgentAfter`). */
const notYet = new WeakMap<Duplex, Promise<unknown>>();

/**
 * Issue #15: `socket` is handed to a call before it leads to the agent: a wake sent to a node with
 * the call's request behind it (node/remote/remote-node.ts `wakePipelined`), answered once the unit
 * is awake, which may take a boot. The call's deadlines begin once `ready` fulfils; until then the
 * wake's own bound applies (a failed wake destroys the socket with its error).
 */
export function leadsToAgentAfter(socket: Duplex, ready: Promise<unknown>): void {
  notYet.set(socket, ready);
}

/** An endpoint that only bounds the waits (tools and tests; the node's are built by node/local/agent-endpoint.ts). */
export function plainEndpoint(path: string, timeouts: AgentTimeouts = DEFAULT_AGENT_TIMEOUTS): AgentEndpoint {
  return { path, timeouts, timedOut: (err) => err };
}

/**
 * The two deadlines of one call to the agent: `connectMs` from now until `watch`'s socket is
 * connected, then `answerMs` (+ `extraMs`, for calls whose answer legitimately waits, e.g. on a
 * service's stop grace) until `answered()`. A missed one calls `expire` once with the endpoint's error.
 */
export class AgentDeadline {
  private timer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly ep: AgentEndpoint,
    private readonly expire: (err: Error) => void,
    private readonly extraMs = 0,
  ) {
    this.arm("connect", ep.timeouts.connectMs);
  }

  /** The connection the call goes over: the answer phase begins once it is connected. */
  watch(socket: Socket): void {
    const ready = notYet.get(socket);
    if (ready) {
      clearTimeout(this.timer);
      // A connection that fails is the call's error, told through its socket: nothing to do here.
      ready.then(() => this.connected()).catch(() => {});
    } else if (socket.connecting) socket.once("connect", () => this.connected());
    else this.connected();
  }

  /** The agent answered (or the call ended some other way): no deadline any more. */
  answered(): void {
    this.done = true;
    clearTimeout(this.timer);
  }

  private connected(): void {
    if (!this.done) this.arm("answer", this.ep.timeouts.answerMs + this.extraMs);
  }

  private arm(phase: "connect" | "answer", ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.done) return;
      this.done = true;
      this.expire(this.ep.timedOut(new AgentTimeoutError(phase, ms)));
    }, ms);
  }
}

/**
 * Bounds the wait for the agent's answer to `req` (an HTTP request to the agent): a missed deadline
 * destroys the request with the endpoint's error, which its 'error' listener receives. The caller
 * calls `answered()` on the returned deadline once the answer is in: the response head when the body
 * streams on, the whole body otherwise.
 */
export function boundAnswer(req: ClientRequest, ep: AgentEndpoint, extraMs = 0): AgentDeadline {
  const deadline = new AgentDeadline(ep, (err) => req.destroy(err), extraMs);
  req.once("socket", (socket) => deadline.watch(socket));
  req.once("close", () => deadline.answered());
  return deadline;
}
