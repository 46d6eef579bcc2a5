import { randomUUID } from "node:crypto";
import { type ClientRequest, type IncomingMessage, request } from "node:http";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import type { ImageRecipe, NetworkLog } from "@ums/protocol";
import { agentClient } from "../../agent/client.js";
import { type AgentTimeouts, DEFAULT_AGENT_TIMEOUTS, leadsToAgentAfter } from "../../agent/deadline.js";
import { AgentUnreachableError, NODE_SENT } from "../../agent/errors.js";
import { RelaySocket, relayOf } from "../../agent/relay.js";
import type { ResourceLimits, ResourcesPolicy } from "../../runtime/runtime.js";
import type {
  CheckpointRecord,
  ImageRecord,
  OrgRecord,
  TemplateRecord,
  UnitRecord,
  UnitStatus,
} from "../../store/records.js";
import { readLimited } from "../../util/read-limited.js";
import { NodeUnreachableError } from "../errors.js";
import type {
  CheckpointResult,
  HttpTarget,
  Progress,
  UnitAgent,
  UnitHealth,
  UnitLease,
  UnitNode,
  WakeOpts,
} from "../unit-node.js";
import { NoLineError, readLine } from "./line.js";
import { StandbyPool } from "./standby.js";
import {
  decodeError,
  encodeError,
  type JsonMethod,
  NDJSON,
  NODE_PREFIX,
  SESSION_UPGRADE,
  SessionGoneError,
  SPLICE_UPGRADE,
  type StreamEvent,
  type WireError,
} from "./wire.js";

/** The most a JSON answer of a node may hold. */
const MAX_ANSWER_BYTES = 8 << 20;
/**
 * How long a node may take (issue #15, a node that is stopped must not hang the API): the head of
 * any answer (a streamed one's progress then comes as it comes); a JSON call's whole answer (a
 * delete of a large unit's disk included); a health check's (the API answers `unhealthy` then);
 * a wake's lease (a boot, or a wait for capacity of up to 60 s).
 */
const CALL_HEAD_MS = 30_000;
const CALL_MS = 120_000;
const HEALTH_MS = 5_000;
const WAKE_MS = 90_000;
/** A wake's records go in a header up to this size (base64url); larger ones go in a request's body. */
const MAX_ARGS_HEADER = 8 * 1024;

/** Where a node's endpoint is, and the secret it takes. */
export interface NodeAddress {
  readonly id: string;
  readonly name: string;
  /** `host:port` of its endpoint (the nodes table's `address`). */
  readonly host: string;
  readonly port: number;
  readonly secret: string;
}

export { NodeUnreachableError };

/**
 * Issue #15: the node seam's second implementation (docs/SCALE-OUT.md): a node in another process,
 * reached over its endpoint (node-endpoint.ts). Calls are JSON; progress streams as NDJSON; a wake
 * holds one request open for its lease; agent calls and the unit's HTTP target go over connections
 * the node splices to them, so bytes stream both ways without being buffered here.
 */
export class RemoteNode implements UnitNode {
  /** This process's session with the node (NodeSession), once opened. */
  private sessionOpening: Promise<NodeSession> | undefined;
  /** Connections opened ahead of the wakes that will use them. */
  private readonly standby = new StandbyPool(() => this.openStandby());

  constructor(
    readonly address: NodeAddress,
    private readonly agentTimeouts: AgentTimeouts = DEFAULT_AGENT_TIMEOUTS,
    /** Told whether the node could be reached (the directory keeps placement away from it meanwhile). */
    private readonly reach?: { unreachable(nodeId: string): void; reached(nodeId: string): void },
  ) {}

  private unreachable(err: unknown): NodeUnreachableError {
    const code = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
    const e = new NodeUnreachableError(
      `node '${this.address.name}' cannot be reached (${code}); its units are unavailable until it is`,
      this.address.id,
    );
    this.reach?.unreachable(this.address.id);
    // Passed on as it is by the agent client (agent/http.ts wrap), not as the agent's failure.
    Object.defineProperty(e, NODE_SENT, { value: true });
    return e;
  }

  private open(path: string, headers: Record<string, string> = {}): ClientRequest {
    return request({
      host: this.address.host,
      port: this.address.port,
      method: "POST",
      path: `${NODE_PREFIX}/${path}`,
      headers: { authorization: `Bearer ${this.address.secret}`, ...headers },
      agent: false,
    });
  }

  /**
   * Sends `body` (or streams it) and resolves with the answer's head, within `headMs` (a node that
   * is stopped still has its connections accepted by the kernel: nothing else would end the wait).
   */
  private send(req: ClientRequest, body: string | Readable, headMs = CALL_HEAD_MS): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const err = Object.assign(new Error(`no answer within ${headMs / 1000} s`), { code: "ETIMEDOUT" });
        req.destroy(err);
      }, headMs);
      timer.unref();
      req.once("response", (res) => {
        clearTimeout(timer);
        this.reach?.reached(this.address.id);
        resolve(res);
      });
      req.once("close", () => clearTimeout(timer));
      req.once("error", (err) => reject(this.unreachable(err)));
      if (typeof body === "string") req.end(body);
      else {
        body.once("error", (err) => req.destroy(err));
        body.pipe(req);
      }
    });
  }

  private async call<T>(
    method: JsonMethod | `leases/${string}` | `builds/${string}`,
    args: unknown[],
    ms = CALL_MS,
  ): Promise<T> {
    const req = this.open(method.startsWith("leases/") || method.startsWith("builds/") ? method : `call/${method}`, {
      "content-type": "application/json",
    });
    // The whole answer within `ms`: a call that streams nothing is done when it answers.
    const res = await this.send(req, JSON.stringify({ args }), ms);
    const timer = setTimeout(
      () => res.destroy(Object.assign(new Error(`no whole answer within ${ms / 1000} s`), { code: "ETIMEDOUT" })),
      ms,
    );
    timer.unref();
    let answer: { result?: unknown; error?: WireError };
    try {
      answer = JSON.parse(await readLimited(res, MAX_ANSWER_BYTES));
    } catch (err) {
      throw this.unreachable(err);
    } finally {
      clearTimeout(timer);
    }
    if (answer.error) throw decodeError(answer.error);
    return answer.result as T;
  }

  /** Reads an NDJSON answer: progress to `progress`, then the result or the error. */
  private async events<T>(res: IncomingMessage, progress: Progress, onLease?: (ev: StreamEvent) => void): Promise<T> {
    if (res.statusCode !== 200 || !String(res.headers["content-type"]).startsWith(NDJSON)) {
      const text = await readLimited(res, MAX_ANSWER_BYTES).catch(() => "");
      const parsed = safeParse(text) as { error?: WireError } | undefined;
      throw parsed?.error ? decodeError(parsed.error) : this.unreachable(new Error(`answered ${res.statusCode}`));
    }
    let buffered = "";
    res.setEncoding("utf8");
    for await (const chunk of res) {
      buffered += chunk;
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const ev = safeParse(buffered.slice(0, nl)) as StreamEvent | undefined;
        buffered = buffered.slice(nl + 1);
        if (!ev) continue;
        if ("progress" in ev) progress(ev.progress);
        else if ("error" in ev) throw decodeError(ev.error);
        else if ("result" in ev) return ev.result as T;
        else onLease?.(ev);
      }
      if (buffered.length > MAX_ANSWER_BYTES) throw this.unreachable(new Error("an answer line is too long"));
    }
    throw this.unreachable(new Error("the answer ended early"));
  }

  private async stream<T>(method: string, args: unknown[], progress: Progress): Promise<T> {
    const req = this.open(`stream/${method}`, { "content-type": "application/json" });
    return this.events<T>(await this.send(req, JSON.stringify({ args })), progress);
  }

  status(unitId: string): Promise<UnitStatus> {
    return this.call("status", [unitId]);
  }
  create(unit: UnitRecord): Promise<void> {
    return this.call("create", [unit]);
  }
  fork(source: UnitRecord, checkpoint: CheckpointRecord, unit: UnitRecord): Promise<void> {
    return this.call("fork", [source, checkpoint, unit]);
  }
  publishTemplate(
    source: UnitRecord,
    checkpoint: CheckpointRecord,
    what: { name: string; description: string },
  ): Promise<TemplateRecord> {
    return this.call("publishTemplate", [source, checkpoint, what]);
  }
  deleteTemplate(template: TemplateRecord): Promise<void> {
    return this.call("deleteTemplate", [template]);
  }
  fromTemplate(template: TemplateRecord, unit: UnitRecord): Promise<void> {
    return this.call("fromTemplate", [template, unit]);
  }
  async importImage(
    org: OrgRecord,
    name: string,
    body: Readable,
    hooks: { progress: Progress; signal?: AbortSignal },
  ): Promise<ImageRecord> {
    const query = new URLSearchParams({ org: JSON.stringify(org), name });
    const req = this.open(`images/import?${query}`, { "content-type": "application/octet-stream" });
    const abort = () => req.destroy(new Error("the import was cancelled"));
    hooks.signal?.addEventListener("abort", abort, { once: true });
    try {
      return await this.events<ImageRecord>(await this.send(req, body), hooks.progress);
    } finally {
      hooks.signal?.removeEventListener("abort", abort);
    }
  }
  buildImage(
    org: OrgRecord,
    recipe: ImageRecipe,
    source: string,
    hooks: {
      progress: Progress;
      signal?: AbortSignal;
      steps?: (draftId: string) => Promise<{ unitId: string; checkpoint: string }>;
    },
  ): Promise<ImageRecord> {
    const steps = hooks.steps;
    if (!steps) return this.stream("buildImage", [org, recipe, source], hooks.progress);
    // The node asks for the steps by an event of its answer; their outcome goes back as a request.
    // A failure of the steps is the build's: thrown as it was here (its kind and fields), not as
    // the node reports it back.
    let failed: { err: unknown } | undefined;
    const runSteps = (draftId: string, build: string) => {
      steps(draftId)
        .then(
          (result) => ({ result }),
          (err: unknown) => {
            failed = { err };
            return { error: encodeError(err) };
          },
        )
        .then((outcome) => this.call(`builds/${encodeURIComponent(build)}/steps`, [outcome]))
        .catch((err: unknown) => {
          failed ??= { err };
        });
    };
    const req = this.open("stream/buildImage", { "content-type": "application/json" });
    return this.send(req, JSON.stringify({ args: [org, recipe, source, true] }))
      .then((res) =>
        this.events<ImageRecord>(res, hooks.progress, (ev) => {
          if ("steps" in ev) runSteps(ev.steps, ev.build);
        }),
      )
      .catch((err: unknown) => {
        throw failed ? failed.err : err;
      });
  }
  fillDraft(imageId: string, unit: UnitRecord): Promise<void> {
    return this.call("fillDraft", [imageId, unit]);
  }
  baseImage(): Promise<{ readonly bytes: number; readonly builtAt: string }> {
    return this.call("baseImage", []);
  }
  deleteImage(image: ImageRecord): Promise<void> {
    return this.call("deleteImage", [image]);
  }
  fromImage(image: ImageRecord, unit: UnitRecord): Promise<void> {
    return this.call("fromImage", [image, unit]);
  }
  destroy(unit: UnitRecord): Promise<boolean> {
    return this.call("destroy", [unit]);
  }
  health(unit: UnitRecord): Promise<UnitHealth> {
    return this.call("health", [unit], HEALTH_MS);
  }
  checkpoint(unit: UnitRecord, comment: string, progress: Progress): Promise<CheckpointResult> {
    return this.stream("checkpoint", [unit, comment], progress);
  }
  restore(
    org: OrgRecord,
    unit: UnitRecord,
    checkpoint: CheckpointRecord,
    progress: Progress,
  ): Promise<CheckpointRecord> {
    return this.stream("restore", [org, unit, checkpoint], progress);
  }
  upgrade(org: OrgRecord, unit: UnitRecord, to: ImageRecord, progress: Progress): Promise<CheckpointRecord> {
    return this.stream("upgrade", [org, unit, to], progress);
  }
  deleteCheckpoint(unit: UnitRecord, checkpoint: CheckpointRecord): Promise<void> {
    return this.call("deleteCheckpoint", [unit, checkpoint]);
  }
  async checkpointsPresent(
    unitId: string,
    ids: readonly string[],
    replicated?: ReadonlySet<string>,
  ): Promise<ReadonlySet<string>> {
    const present = await this.call<string[]>("checkpointsPresent", [unitId, ids, [...(replicated ?? [])]]);
    return new Set(present);
  }
  moveOut(unit: UnitRecord, progress: Progress): Promise<CheckpointRecord> {
    return this.stream("moveOut", [unit], progress);
  }
  moveDone(unit: UnitRecord): Promise<void> {
    return this.call("moveDone", [unit]);
  }
  moveAborted(unit: UnitRecord): Promise<void> {
    return this.call("moveAborted", [unit]);
  }
  moveIn(unit: UnitRecord, checkpoint: CheckpointRecord, progress: Progress, from?: string): Promise<void> {
    return this.stream("moveIn", [unit, checkpoint, from ?? null], progress);
  }
  resourceLimits(): Promise<ResourceLimits> {
    return this.call("resourceLimits", []);
  }
  applyResources(unitId: string, resources: ResourcesPolicy): Promise<boolean> {
    return this.call("applyResources", [unitId, resources]);
  }
  applyNetworkPolicy(unitId: string, policyJson: string): Promise<void> {
    return this.call("applyNetworkPolicy", [unitId, policyJson]);
  }
  networkReport(unitId: string, limit: number): Promise<NetworkLog> {
    return this.call("networkReport", [unitId, limit]);
  }

  /**
   * Wakes the unit in this process's session with the node (one request: the lease, and with
   * `agent` its first connection to the unit's agent); records too large for a header go the older
   * way (a wake request held open, then a splice per call).
   */
  async wake(org: OrgRecord, unit: UnitRecord, opts: WakeOpts = {}): Promise<UnitLease> {
    const records = JSON.stringify([org, unit]);
    const args = Buffer.from(records).toString("base64url");
    if (args.length <= MAX_ARGS_HEADER) {
      for (let attempt = 0; ; attempt++) {
        const session = await this.session();
        try {
          const ready = this.standby.take();
          // No wait for capacity (it may be long, and it is given up by a signal): the first call
          // goes behind the wake.
          if (ready && opts.agent !== false && !opts.signal) return this.wakePipelined(ready, session, unit, records);
          const lease = ready && (await this.wakeOnStandby(ready, session, unit, records, opts));
          return lease || (await this.wakeIn(session, unit, args, opts));
        } catch (err) {
          // The node restarted since: a new session, once.
          if (!(err instanceof SessionGoneError) || attempt > 0) throw err;
          session.close();
        }
      }
    }
    return this.wakeHeld(org, unit);
  }

  /** This process's session with the node, opened on first use and again once it broke. */
  private async session(): Promise<NodeSession> {
    const current = this.sessionOpening;
    if (current) {
      const s = await current.catch(() => undefined);
      if (s && !s.isClosed) return s;
      if (this.sessionOpening === current) this.sessionOpening = undefined;
      if (this.sessionOpening) return this.session();
    }
    const opening = NodeSession.open(this.address, (err) => this.unreachable(err)).then(
      (s) => {
        s.onClose(() => {
          if (this.sessionOpening === opening) this.sessionOpening = undefined;
        });
        this.reach?.reached(this.address.id);
        return s;
      },
      (err: unknown) => {
        if (this.sessionOpening === opening) this.sessionOpening = undefined;
        throw err;
      },
    );
    this.sessionOpening = opening;
    return opening;
  }

  private wakeIn(session: NodeSession, unit: UnitRecord, args: string, opts: WakeOpts): Promise<UnitLease> {
    const agent = opts.agent !== false;
    return new Promise<UnitLease>((resolve, reject) => {
      const req = request({
        host: this.address.host,
        port: this.address.port,
        method: "GET",
        path: `${NODE_PREFIX}/wake?agent=${agent ? 1 : 0}`,
        headers: {
          authorization: `Bearer ${this.address.secret}`,
          connection: "Upgrade",
          upgrade: SPLICE_UPGRADE,
          "x-ums-session": session.id,
          "x-ums-args": args,
        },
        agent: false,
      });
      const timer = setTimeout(() => {
        req.destroy(Object.assign(new Error(`no answer within ${WAKE_MS / 1000} s`), { code: "ETIMEDOUT" }));
      }, WAKE_MS);
      timer.unref();
      // Issue #16: the caller went away (its wake may wait for a running slot): the node sees this
      // request end, and its wake leaves the queue.
      const giveUp = () => req.destroy(Object.assign(new Error("the caller went away"), { code: "ECONNRESET" }));
      opts.signal?.addEventListener("abort", giveUp, { once: true });
      req.once("close", () => opts.signal?.removeEventListener("abort", giveUp));
      req.once("upgrade", (res, socket: Socket, head) => {
        clearTimeout(timer);
        socket.setTimeout(0);
        if (head.length > 0) socket.unshift(head);
        const id = String(res.headers["x-ums-lease"] ?? "");
        resolve(
          new RemoteLease(
            this,
            unit,
            { id, booted: res.headers["x-ums-booted"] === "1" },
            session,
            this.agentTimeouts,
            socket,
          ),
        );
      });
      req.once("response", (res) => {
        clearTimeout(timer);
        readLimited(res, MAX_ANSWER_BYTES)
          .then((text) => {
            const parsed = safeParse(text) as { result?: { lease: string; booted: boolean }; error?: WireError };
            if (parsed?.result) {
              resolve(
                new RemoteLease(
                  this,
                  unit,
                  { id: parsed.result.lease, booted: parsed.result.booted },
                  session,
                  this.agentTimeouts,
                ),
              );
            } else if (parsed?.error) reject(decodeError(parsed.error));
            else reject(this.unreachable(new Error(`answered ${res.statusCode} to a wake`)));
          })
          .catch((err: unknown) => reject(this.unreachable(err)));
      });
      req.once("error", (err) => {
        clearTimeout(timer);
        reject(this.unreachable(err));
      });
      req.end();
    });
  }

  /**
   * A wake on a standby connection (StandbyPool): the wake as a line, the answer a line (the lease,
   * after which the connection is spliced to the agent, or the result or error). Undefined when the
   * connection turns out closed before its answer (the node restarted, say): the caller then wakes
   * on a connection of its own; a wake the node had begun on it is given up there when it sees the
   * connection's end.
   */
  private async wakeOnStandby(
    socket: Socket,
    session: NodeSession,
    unit: UnitRecord,
    records: string,
    opts: WakeOpts,
  ): Promise<UnitLease | undefined> {
    const agent = opts.agent !== false;
    let cut: Error | undefined;
    const destroy = (err: Error) => {
      cut ??= err;
      socket.destroy();
    };
    const timer = setTimeout(() => {
      destroy(Object.assign(new Error(`no answer within ${WAKE_MS / 1000} s`), { code: "ETIMEDOUT" }));
    }, WAKE_MS);
    timer.unref();
    // Issue #16: the caller went away: the node sees the connection end, and its wake leaves the queue.
    const giveUp = () => destroy(Object.assign(new Error("the caller went away"), { code: "ECONNRESET" }));
    opts.signal?.addEventListener("abort", giveUp, { once: true });
    const answer = readLine(socket, MAX_ANSWER_BYTES);
    socket.write(`{"wake":{"session":${JSON.stringify(session.id)},"records":${records},"agent":${agent}}}\n`);
    let line: string;
    try {
      line = await answer;
    } catch (err) {
      if (cut) throw this.unreachable(cut);
      if (err instanceof NoLineError && err.ended) return undefined;
      socket.destroy();
      throw this.unreachable(err);
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", giveUp);
    }
    const parsed = safeParse(line) as
      | { lease?: unknown; booted?: unknown; result?: { lease: string; booted: boolean }; error?: WireError }
      | undefined;
    if (typeof parsed?.lease === "string") {
      return new RemoteLease(
        this,
        unit,
        { id: parsed.lease, booted: parsed.booted === true },
        session,
        this.agentTimeouts,
        socket,
      );
    }
    socket.destroy();
    if (parsed?.result) {
      return new RemoteLease(
        this,
        unit,
        { id: parsed.result.lease, booted: parsed.result.booted },
        session,
        this.agentTimeouts,
      );
    }
    if (parsed?.error) throw decodeError(parsed.error);
    throw this.unreachable(new Error("a standby connection answered no lease"));
  }

  /**
   * A wake on a standby connection whose lease is returned before the node's answer: the lease's
   * first call to the agent goes on the same connection right behind the wake's line, and the node
   * hands it to the agent once the unit is awake (what it reads before its answer it keeps for the
   * agent). This saves the wait for the answer, a round trip between the two processes, on every
   * request to a unit through an API replica. The lease's id is chosen here, so that it can be
   * released before the answer (node-endpoint.ts `wakeOn`: a release of a lease still waking ends it
   * as soon as it is held). The answer line is taken out of the connection's bytes below the agent
   * client (RelaySocket `firstLine`); a wake that fails fails the first call with the wake's error
   * (the socket is destroyed with it), and any other use of the lease with it too. The first
   * call's deadlines begin with the answer (agent/deadline.ts `leadsToAgentAfter`).
   */
  private wakePipelined(socket: Socket, session: NodeSession, unit: UnitRecord, records: string): UnitLease {
    const relay = relayOf(socket);
    if (!relay) throw new Error("a standby connection is a RelaySocket (openStandby)");
    const id = randomUUID();
    const line = relay.firstLine(MAX_ANSWER_BYTES);
    socket.write(
      `{"wake":{"session":${JSON.stringify(session.id)},"records":${records},"agent":true,"lease":"${id}"}}\n`,
    );
    const timer = setTimeout(() => {
      socket.destroy(Object.assign(new Error(`no answer within ${WAKE_MS / 1000} s`), { code: "ETIMEDOUT" }));
    }, WAKE_MS);
    timer.unref();
    const answer = line.then(
      (text) => {
        clearTimeout(timer);
        const parsed = safeParse(text) as { lease?: unknown; booted?: unknown; error?: WireError } | undefined;
        if (typeof parsed?.lease === "string") return { id: parsed.lease, booted: parsed.booted === true };
        throw parsed?.error
          ? decodeError(parsed.error)
          : this.unreachable(new Error("a standby connection answered no lease"));
      },
      (err: unknown) => {
        clearTimeout(timer);
        throw this.unreachable(socket.errored ?? err);
      },
    );
    // The first call on the socket fails with the wake's error (the agent client passes on errors
    // the node sent as they are: agent/http.ts `wrap`).
    answer.catch((err: Error) => socket.destroy(err));
    leadsToAgentAfter(socket, answer);
    return new RemoteLease(this, unit, { id, answer }, session, this.agentTimeouts, socket);
  }

  /**
   * A new connection to the node whose reads land in buffers of its own (RelaySocket): one that
   * leads to a unit's agent, where a raw file read's bytes go from them (agent/fs.ts `agentRead`).
   */
  private relaySocket(): Socket {
    const { socket } = new RelaySocket({ host: this.address.host, port: this.address.port });
    socket.setNoDelay(true);
    return socket;
  }

  /** A connection the node keeps ready for a wake (`GET /node/v1/standby`), once it answered 101. */
  private openStandby(): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const req = request({
        host: this.address.host,
        port: this.address.port,
        createConnection: () => this.relaySocket(),
        method: "GET",
        path: `${NODE_PREFIX}/standby`,
        headers: { authorization: `Bearer ${this.address.secret}`, connection: "Upgrade", upgrade: SPLICE_UPGRADE },
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${HEALTH_MS / 1000} s`)), HEALTH_MS);
      timer.unref();
      req.once("upgrade", (_res, socket: Socket, head) => {
        clearTimeout(timer);
        socket.setTimeout(0);
        socket.setNoDelay(true);
        socket.setKeepAlive(true, 10_000);
        // The node sends nothing before the wake's answer: bytes here mean it is no standby.
        if (head.length > 0) {
          socket.destroy();
          reject(new Error("a standby connection sent bytes unasked"));
        } else resolve(socket);
      });
      req.once("response", (res) => {
        clearTimeout(timer);
        res.resume();
        reject(new Error(`answered ${res.statusCode} to a standby connection`));
      });
      req.once("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.end();
    });
  }

  /** Closes the idle standby connections and opens no more (the node moved); calls in flight go on. */
  close(): void {
    this.standby.close();
  }

  /** Opens standby connections again once a lease is released (StandbyPool.fill). */
  refillStandby(): void {
    this.standby.fill();
  }

  /** A wake whose request stays open as the lease's hold (records too large for the session's way). */
  private async wakeHeld(org: OrgRecord, unit: UnitRecord): Promise<UnitLease> {
    const req = this.open("wake", { "content-type": "application/json" });
    const res = await this.send(req, JSON.stringify({ args: [org, unit] }), WAKE_MS);
    const lease = await new Promise<{ id: string; booted: boolean }>((resolve, reject) => {
      // The first line is the lease (or the error); the request then stays open: it is the hold.
      this.events(
        res,
        () => {},
        (ev) => {
          if ("lease" in ev) resolve({ id: ev.lease, booted: ev.booted });
        },
      )
        .then(() => reject(this.unreachable(new Error("the node answered a wake without a lease"))))
        .catch(reject);
    }).catch((err: unknown) => {
      req.destroy();
      throw err;
    });
    return new RemoteLease(this, unit, lease, { release: () => req.destroy() }, this.agentTimeouts);
  }

  /**
   * A connection the node splices to the leased unit's agent (`agent`) or HTTP target (`http`):
   * `done` gets it once the node answered 101; a refusal is the node's error.
   */
  splice(leaseId: string, what: string, done: (err: Error | null, socket?: Socket) => void): void {
    const req = request({
      host: this.address.host,
      port: this.address.port,
      // A unit's agent: its answers (a file's bytes among them) can go from the connection's own
      // buffers (relayOf); a unit's port (a proxied request) is read the ordinary way. (An `agent`
      // option would make the connection itself: node:http then ignores `createConnection`.)
      ...(what === "agent" ? { createConnection: () => this.relaySocket() } : { agent: false }),
      method: "GET",
      path: `${NODE_PREFIX}/leases/${encodeURIComponent(leaseId)}/${what}`,
      headers: {
        authorization: `Bearer ${this.address.secret}`,
        connection: "Upgrade",
        upgrade: SPLICE_UPGRADE,
      },
    });
    req.once("upgrade", (_res, socket: Socket, head) => {
      socket.setTimeout(0);
      if (head.length > 0) socket.unshift(head);
      done(null, socket);
    });
    req.once("response", (res) => {
      readLimited(res, MAX_ANSWER_BYTES)
        .then((text) => {
          const parsed = safeParse(text) as { error?: WireError } | undefined;
          done(
            parsed?.error
              ? decodeError(parsed.error)
              : new AgentUnreachableError(new Error(`node answered ${res.statusCode}`)),
          );
        })
        .catch((err: unknown) => done(new AgentUnreachableError(err)));
    });
    req.once("error", (err) => done(this.unreachable(err)));
    req.end();
  }

  /** The port of the leased unit's HTTP target (spec 4.1), as the node finds it. */
  async httpTargetPort(leaseId: string): Promise<number> {
    const { port } = await this.call<{ port: number }>(`leases/${encodeURIComponent(leaseId)}/http-target`, []);
    return port;
  }

  /** Tells the node the unit's services changed (its HTTP target is asked again). */
  servicesChanged(leaseId: string): void {
    const req = this.open(`leases/${encodeURIComponent(leaseId)}/services-changed`);
    req.on("response", (res) => res.resume());
    req.on("error", () => {});
    req.end();
  }
}

/** How a lease is released: a line in the session, or the end of the wake request that holds it. */
interface LeaseHold {
  release(id: string): void;
}

/** A wake whose answer is still to come (wakePipelined): the lease's id, chosen by the API, and the answer. */
interface PendingWake {
  readonly id: string;
  readonly answer: Promise<{ id: string; booted: boolean }>;
}

/** A unit woken on a remote node, held until released (LeaseHold). */
class RemoteLease implements UnitLease {
  readonly agent: UnitAgent;
  private released = false;
  private id: string;
  private wasBooted: boolean;
  /** Until the wake's answer (wakePipelined): what needs the lease held on the node waits for it. */
  private readonly answered: Promise<void> | undefined;

  constructor(
    private readonly node: RemoteNode,
    readonly unit: UnitRecord,
    lease: { id: string; booted: boolean } | PendingWake,
    private readonly hold: LeaseHold,
    timeouts: AgentTimeouts,
    /** The connection to the agent the wake made: the first call's. */
    private first?: Socket,
  ) {
    this.id = lease.id;
    this.wasBooted = "booted" in lease && lease.booted;
    if ("answer" in lease) {
      this.answered = lease.answer.then((known) => {
        this.wasBooted = known.booted;
        if (known.id === this.id) return;
        // A node from before API-chosen ids named its own: released by it also if the release came first.
        this.id = known.id;
        if (this.released) this.hold.release(known.id);
      });
      // Its failure reaches every use of the lease (the first call's through its socket).
      this.answered.catch(() => {});
    }
    const afterAnswer = (then: () => void, done: (err: Error | null, socket?: Socket) => void) => {
      if (!this.answered) return then();
      // A failed wake, or a connect that throws, is the call's error.
      this.answered.then(then).catch((err: Error) => done(err));
    };
    this.agent = agentClient({
      path: `/node/${node.address.name}/${unit.id}`,
      timeouts,
      timedOut: (err) => err,
      connect: (done) => {
        const socket = this.first;
        this.first = undefined;
        if (socket && !socket.destroyed) done(null, socket);
        else afterAnswer(() => node.splice(this.id, "agent", done), done);
      },
    });
    first?.on("error", () => {});
  }

  /** Whether the wake booted the unit (false until a pipelined wake's answer is in: read it after a call). */
  get booted(): boolean {
    return this.wasBooted;
  }

  async httpTarget(): Promise<HttpTarget> {
    await this.answered;
    const port = await this.node.httpTargetPort(this.id);
    return {
      host: `${this.unit.id}.${this.node.address.name}`,
      port,
      connect: (done) => this.node.splice(this.id, `http?port=${port}`, done),
    };
  }

  servicesChanged(): void {
    // A failed wake has no services to tell of.
    (this.answered ?? Promise.resolve()).then(() => this.node.servicesChanged(this.id)).catch(() => {});
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.first?.destroy();
    this.first = undefined;
    // By the id chosen here even before the answer: the node ends a lease still waking at once.
    this.hold.release(this.id);
    this.node.refillStandby();
  }
}

/**
 * An API process's session with a node (node-endpoint.ts `GET /node/v1/session`): the leases it
 * takes there are released by a line each, and all at once by the node when the session ends.
 */
class NodeSession implements LeaseHold {
  private closed = false;
  private readonly closeHandlers: (() => void)[] = [];

  private constructor(
    readonly id: string,
    private readonly socket: Socket,
  ) {
    socket.on("error", () => {});
    socket.once("end", () => socket.destroy());
    socket.once("close", () => {
      this.closed = true;
      for (const h of this.closeHandlers) h();
    });
    // Nothing more comes from the node; a session is kept for as long as the process runs.
    socket.resume();
    // A release must reach the node before whatever the API does next (a move checks it is idle).
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 10_000);
    socket.unref();
  }

  static open(address: NodeAddress, unreachable: (err: unknown) => Error): Promise<NodeSession> {
    return new Promise((resolve, reject) => {
      const req = request({
        host: address.host,
        port: address.port,
        method: "GET",
        path: `${NODE_PREFIX}/session`,
        headers: { authorization: `Bearer ${address.secret}`, connection: "Upgrade", upgrade: SESSION_UPGRADE },
        agent: false,
      });
      const timer = setTimeout(
        () => req.destroy(Object.assign(new Error(`no answer within ${HEALTH_MS / 1000} s`), { code: "ETIMEDOUT" })),
        HEALTH_MS,
      );
      timer.unref();
      req.once("upgrade", (_res, socket: Socket, head) => {
        // The first line names the session.
        const fail = (err: unknown) => {
          clearTimeout(timer);
          socket.destroy();
          reject(unreachable(err));
        };
        socket.on("error", () => {});
        if (head.length > 0) socket.unshift(head);
        readLine(socket, 1024)
          .then((line) => {
            clearTimeout(timer);
            const id = (safeParse(line) as { session?: unknown } | undefined)?.session;
            if (typeof id !== "string") return fail(new Error("no session line"));
            resolve(new NodeSession(id, socket));
          })
          .catch((err: unknown) =>
            fail(
              new Error(
                err instanceof NoLineError && err.ended ? "the session ended before it began" : "no session line",
              ),
            ),
          );
      });
      req.once("response", (res) => {
        clearTimeout(timer);
        res.resume();
        reject(unreachable(new Error(`answered ${res.statusCode} to a session`)));
      });
      req.once("error", (err) => {
        clearTimeout(timer);
        reject(unreachable(err));
      });
      req.end();
    });
  }

  /** Closed (by either side): a wake in it is refused; the next one opens another. */
  get isClosed(): boolean {
    return this.closed;
  }

  onClose(handler: () => void): void {
    if (this.closed) handler();
    else this.closeHandlers.push(handler);
  }

  release(leaseId: string): void {
    // A session that ended released its leases with it.
    if (!this.closed) this.socket.write(`${JSON.stringify({ release: leaseId })}\n`);
  }

  close(): void {
    this.closed = true;
    this.socket.destroy();
  }
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
