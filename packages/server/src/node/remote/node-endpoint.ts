import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { RelaySocket, relayPair } from "../../agent/relay.js";
import { childFailure } from "../../replication/children.js";
import type { OrgRecord, UnitRecord } from "../../store/records.js";
import { readLimited } from "../../util/read-limited.js";
import type { LocalLease } from "../local/lease.js";
import type { LocalNode } from "../local/local-node.js";
import { readLine } from "./line.js";
import {
  bearerMatches,
  decodeError,
  encodeError,
  JSON_METHODS,
  type JsonMethod,
  NDJSON,
  NODE_PREFIX,
  PROGRESS_METHODS,
  type ProgressMethod,
  SEND_UPGRADE,
  SESSION_UPGRADE,
  SessionGoneError,
  SPLICE_UPGRADE,
  type StreamEvent,
  type WireError,
} from "./wire.js";

/** The most a call's JSON body may hold (records and small arguments only). */
const MAX_CALL_BYTES = 1 << 20;
/** A checkpoint's send that moves no byte this long (the receiving node stopped) is cut. */
const SEND_IDLE_MS = 60_000;
/** What a wake keeps of the bytes sent behind it for the agent, at most (wakeOn). */
const MAX_EARLY_BYTES = 1 << 20;
/** A unit's HTTP target answers a connect at once on the node's own bridge. */
const TARGET_CONNECT_MS = 5_000;

/** A request the endpoint refuses before doing anything: its status and what to fix. */
class Refused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface HeldLease {
  readonly lease: LocalLease;
  /** The session it was taken in (released by a line on it, or with it); none: its wake request holds it. */
  readonly session?: Session;
}

/** An API process's session (`GET /node/v1/session`): the leases it took, released with it. */
interface Session {
  readonly id: string;
  readonly socket: Socket;
  readonly leases: Set<string>;
  /** Leases named by the API (a standby wake's `lease`) whose wake is still going on. */
  readonly waking: Set<string>;
  /** Of those, the ones the API released already: each is released as soon as it is held. */
  readonly releasedEarly: Set<string>;
}

/** A lease id the API chooses (a UUID, as the node's own). */
const LEASE_ID = /^[A-Za-z0-9-]{8,64}$/;

/** A session's lines are `{"release": id}`: short. */
const MAX_SESSION_LINE = 1024;

/**
 * Issue #15: the node's endpoint (docs/SCALE-OUT.md, "The node endpoint"): what an API process asks
 * of the units of this host, over HTTP with the deployment's node secret as a bearer token.
 *
 * - `POST /node/v1/call/{method}` `{"args": [...]}`: one UnitNode call (wire.ts JSON_METHODS); the
 *   answer is `{"result": ...}` or `{"error": WireError}` (status 200 either way: the call was made).
 * - `POST /node/v1/stream/{method}`: a call with progress (checkpoint, restore, upgrade, a build):
 *   NDJSON lines `{"progress"}` then one `{"result"}` or `{"error"}`.
 * - `POST /node/v1/images/import?org=&name=`: the archive as the body; NDJSON as above.
 * - `POST /node/v1/send` `{"args": [unitId, checkpointId, have]}`: another node's request for a
 *   checkpoint of a unit moving to it: the raw `btrfs send` stream (LocalNode.sendCheckpoint).
 * - `POST /node/v1/wake` `{"args": [org, unit]}`: the unit woken and held; the first NDJSON line
 *   names the lease; the hold lasts as long as this request does (an API that dies releases it).
 * - `POST /node/v1/leases/{id}/services-changed`.
 * - `GET /node/v1/leases/{id}/agent` and `/leases/{id}/http?port=` with `Upgrade: ums-node-splice`:
 *   the node connects to the unit's agent (or to its HTTP target on the node's bridge), answers 101
 *   and relays bytes both ways; the API's client then speaks to the agent (or the unit) directly.
 *   A connection that cannot be made is answered with the error as JSON instead.
 * - `GET /node/v1/session` with `Upgrade: ums-node-session`: an API process's session (openSession).
 * - `GET /node/v1/wake` with `Upgrade: ums-node-splice`: a wake in a session (wakeOn).
 * - `GET /node/v1/standby` with `Upgrade: ums-node-splice`: a connection opened ahead of need, which
 *   then takes one wake as a line (standby).
 * - `GET /node/v1/send` with `Upgrade: ums-node-send` (the arguments in `x-ums-args`): `send`'s
 *   stream as raw bytes after the 101 (sendRaw).
 */
export class NodeEndpoint {
  private readonly leases = new Map<string, HeldLease>();
  private readonly sessions = new Map<string, Session>();
  /** Recipe builds waiting for the API to run their steps, by build id. */
  private readonly builds = new Map<
    string,
    { resolve(r: { unitId: string; checkpoint: string }): void; reject(err: unknown): void }
  >();
  private readonly server: Server;
  private readonly spliced = new Set<Duplex>();

  private constructor(
    private readonly node: LocalNode,
    private readonly secret: string,
    private readonly log: Logger,
  ) {
    this.server = createServer((req, res) => {
      this.answer(req, res).catch((err: unknown) => {
        this.log.error({ err }, "node endpoint: a request failed");
        if (!res.headersSent) sendJson(res, 500, { error: encodeError(err) });
        else res.destroy();
      });
    });
    this.server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on("error", () => {});
      this.splice(req, socket as Socket, head).catch((err: unknown) => {
        this.log.warn({ err }, "node endpoint: a splice failed");
        socket.destroy();
      });
    });
    this.server.keepAliveTimeout = 5_000;
    this.server.headersTimeout = 10_000;
    this.server.requestTimeout = 0; // calls stream progress for as long as they run
  }

  /** Listens on `host`:`port` (0: any free port). */
  static async listen(opts: {
    node: LocalNode;
    secret: string;
    log: Logger;
    host: string;
    port: number;
  }): Promise<NodeEndpoint> {
    const ep = new NodeEndpoint(opts.node, opts.secret, opts.log);
    await new Promise<void>((resolve, reject) => {
      ep.server.once("error", reject);
      ep.server.listen({ host: opts.host, port: opts.port }, () => {
        ep.server.off("error", reject);
        resolve();
      });
    });
    return ep;
  }

  get port(): number {
    const a = this.server.address();
    return typeof a === "object" && a ? a.port : 0;
  }

  /** Stops listening; held leases are released and spliced connections cut. */
  async close(): Promise<void> {
    for (const s of this.spliced) s.destroy();
    for (const s of this.sessions.values()) s.socket.destroy();
    for (const b of this.builds.values()) b.reject(new Error("the node stops"));
    this.builds.clear();
    for (const { lease } of this.leases.values()) lease.release();
    this.leases.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private authorized(req: IncomingMessage): boolean {
    return bearerMatches(req.headers.authorization, this.secret);
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://node");
    try {
      if (!this.authorized(req)) throw new Refused(401, "the node secret is missing or wrong");
      if (req.method !== "POST") throw new Refused(405, "only POST (and GET upgrades) here");
      const path = url.pathname.startsWith(`${NODE_PREFIX}/`) ? url.pathname.slice(NODE_PREFIX.length + 1) : "";
      const [what, name, sub] = path.split("/");
      if (what === "call" && name && (JSON_METHODS as readonly string[]).includes(name)) {
        const args = await readArgs(req);
        let result: unknown;
        try {
          result = await this.call(name as JsonMethod, args);
        } catch (err) {
          sendJson(res, 200, { error: encodeError(err) });
          return;
        }
        sendJson(res, 200, { result: result === undefined ? null : result });
        return;
      }
      if (what === "stream" && name && (PROGRESS_METHODS as readonly string[]).includes(name)) {
        const args = await readArgs(req);
        const gone = new AbortController();
        res.once("close", () => gone.abort());
        await streamed(res, (progress, event) =>
          this.progressCall(name as ProgressMethod, args, progress, { event, gone: gone.signal }),
        );
        return;
      }
      if (what === "builds" && name && sub === "steps") {
        const [outcome] = await readArgs(req);
        const waiting = this.builds.get(name);
        if (!waiting) throw new Refused(404, "no build waits for its steps under that id");
        this.builds.delete(name);
        const o = outcome as { result?: { unitId: string; checkpoint: string }; error?: WireError } | null;
        if (o?.result) waiting.resolve(o.result);
        else waiting.reject(o?.error ? decodeError(o.error) : new Error("the steps answered nothing"));
        sendJson(res, 200, { result: null });
        return;
      }
      if (what === "images" && name === "import") {
        const org = parseJson<OrgRecord>(url.searchParams.get("org"), "org");
        const image = url.searchParams.get("name") ?? "";
        const abort = new AbortController();
        res.once("close", () => abort.abort());
        await streamed(res, (progress) => this.node.importImage(org, image, req, { progress, signal: abort.signal }));
        return;
      }
      if (what === "send" && !name) {
        const [unitId, checkpointId, have] = await readArgs(req);
        await this.send(res, String(unitId), String(checkpointId), Array.isArray(have) ? have.map(String) : []);
        return;
      }
      if (what === "wake" && !name) {
        await this.wake(res, await readArgs(req));
        return;
      }
      if (what === "leases" && name && sub === "http-target") {
        const held = this.leases.get(name);
        if (!held) throw new Refused(404, "that lease was released (or this node restarted)");
        try {
          const { port } = await held.lease.httpTarget();
          sendJson(res, 200, { result: { port } });
        } catch (err) {
          sendJson(res, 200, { error: encodeError(err) });
        }
        return;
      }
      if (what === "leases" && name && sub === "services-changed") {
        this.leases.get(name)?.lease.servicesChanged();
        sendJson(res, 200, { result: null });
        return;
      }
      throw new Refused(404, `no ${req.method} ${url.pathname} on a node`);
    } catch (err) {
      if (!(err instanceof Refused)) throw err;
      req.resume();
      sendJson(res, err.status, { error: encodeError(err) });
    }
  }

  private call(method: JsonMethod, args: unknown[]): Promise<unknown> {
    const n = this.node;
    const a = (i: number) => args[i] as never;
    switch (method) {
      case "checkpointsPresent":
        return n
          .checkpointsPresent(a(0), a(1), new Set((args[2] as string[] | null) ?? []))
          .then((present) => [...present]);
      default: {
        const fn = n[method] as (...x: unknown[]) => Promise<unknown>;
        return fn.apply(n, args);
      }
    }
  }

  private progressCall(
    method: ProgressMethod,
    args: unknown[],
    progress: (m: string) => void,
    call: { event: (ev: StreamEvent) => void; gone: AbortSignal },
  ): Promise<unknown> {
    const n = this.node;
    const a = (i: number) => args[i] as never;
    switch (method) {
      case "checkpoint":
        return n.checkpoint(a(0), a(1), progress);
      case "restore":
        return n.restore(a(0), a(1), a(2), progress);
      case "upgrade":
        return n.upgrade(a(0), a(1), a(2), progress);
      case "moveOut":
        return n.moveOut(a(0), progress);
      case "moveIn":
        return n.moveIn(a(0), a(1), progress, (args[2] as string | null) ?? undefined);
      case "buildImage":
        // A recipe with steps: the API runs them in a unit of the draft (on this node), asked by an
        // event of this answer; its outcome comes back as `POST /node/v1/builds/{id}/steps`.
        return n.buildImage(a(0), a(1), a(2), {
          progress,
          ...(args[3] === true && { steps: (draftId: string) => this.askSteps(draftId, call) }),
        });
    }
  }

  /** Asks the API (an event of the build's answer) to run a recipe's steps; its outcome comes as a request. */
  private askSteps(
    draftId: string,
    call: { event: (ev: StreamEvent) => void; gone: AbortSignal },
  ): Promise<{ unitId: string; checkpoint: string }> {
    return new Promise((resolve, reject) => {
      const id = randomUUID();
      const fail = () => {
        if (this.builds.delete(id)) reject(new Error("the API process that asked for the build went away"));
      };
      if (call.gone.aborted) return fail();
      call.gone.addEventListener("abort", fail, { once: true });
      this.builds.set(id, {
        resolve: (r) => {
          call.gone.removeEventListener("abort", fail);
          resolve(r);
        },
        reject: (err) => {
          call.gone.removeEventListener("abort", fail);
          reject(err);
        },
      });
      call.event({ steps: draftId, build: id });
    });
  }

  /**
   * Another node asks for a checkpoint of a unit moving to it (`have`: the unit's checkpoints it
   * holds): the raw `btrfs send` stream, incremental against the newest of `have` this node holds
   * too (named in `x-ums-parent`). A stream that fails is cut, never ended: the receiver keeps
   * nothing of it.
   */
  private async send(res: ServerResponse, unitId: string, checkpointId: string, have: string[]): Promise<void> {
    let left = false;
    let kill = () => {
      left = true;
    };
    res.once("close", () => kill());
    let sent: Awaited<ReturnType<LocalNode["sendCheckpoint"]>>;
    try {
      sent = await this.node.sendCheckpoint(unitId, checkpointId, have);
    } catch (err) {
      sendJson(res, 409, { error: encodeError(err) });
      return;
    }
    const { parent, child } = sent;
    // The receiver left meanwhile, or leaves: the send stops (a send blocked on a full pipe would
    // keep the snapshot busy for good); so does one that moves nothing for SEND_IDLE_MS.
    kill = () => child.kill();
    if (left) return child.kill();
    res.socket?.setTimeout(SEND_IDLE_MS, () => res.destroy());
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "cache-control": "no-store",
      "x-ums-parent": parent ?? "",
    });
    // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe"
    child.proc.stdout!.pipe(res, { end: false });
    const exit = await child.exit;
    const why = childFailure("btrfs send", exit);
    if (why) {
      this.log.warn({ unitId, checkpoint: checkpointId, err: why }, "node endpoint: sending a checkpoint failed");
      res.destroy();
    } else res.end();
  }

  /**
   * `GET /node/v1/send` upgraded (SEND_UPGRADE): the same send as `send`, its stream as the raw bytes
   * after the 101 (no HTTP framing: the receiver reads them into buffers of its own and checks that
   * the stream ends with its end command), the connection ended once the send is whole and reset if
   * it failed.
   */
  private async sendRaw(
    socket: Socket,
    unitId: string,
    checkpointId: string,
    have: string[],
    refuse: (status: number, err: unknown) => void,
  ): Promise<void> {
    // The stream from `btrfs send` reaches this process over a socket pair, read into buffers of
    // its own (no buffer per read) and written on to the receiver.
    let pair: Awaited<ReturnType<typeof relayPair>>;
    try {
      pair = await relayPair();
    } catch (err) {
      return refuse(500, err);
    }
    let sent: Awaited<ReturnType<LocalNode["sendCheckpoint"]>>;
    try {
      sent = await this.node.sendCheckpoint(unitId, checkpointId, have, pair.peer);
    } catch (err) {
      pair.relay.socket.destroy();
      return refuse(409, err);
    } finally {
      // The child has its own copy (or there is no child).
      pair.peer.destroy();
    }
    const { parent, child } = sent;
    // The receiver gone, or reading nothing for SEND_IDLE_MS: the send stops (one blocked on a full
    // socket would keep the snapshot busy for good).
    socket.once("close", () => {
      child.kill();
      pair.relay.socket.destroy();
    });
    socket.setTimeout(SEND_IDLE_MS, () => socket.destroy());
    if (socket.destroyed) return child.kill();
    this.spliced.add(socket);
    socket.once("close", () => this.spliced.delete(socket));
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: ${SEND_UPGRADE}\r\nx-ums-parent: ${parent ?? ""}\r\n\r\n`,
    );
    pair.relay.beginRaw();
    const relayed = pair.relay
      .pumpTo(socket, Buffer.alloc(0), () => {}, { end: false })
      .then(
        () => undefined,
        (err: unknown) => (err instanceof Error ? err.message : String(err)),
      );
    const [cut, exit] = await Promise.all([relayed, child.exit]);
    pair.relay.socket.destroy();
    const why = childFailure("btrfs send", exit) ?? (cut && `the relay to the receiving node failed: ${cut}`);
    if (why) {
      this.log.warn({ unitId, checkpoint: checkpointId, err: why }, "node endpoint: sending a checkpoint failed");
      if (!socket.destroyed) socket.resetAndDestroy();
    } else socket.end();
  }

  private async wake(res: ServerResponse, args: unknown[]): Promise<void> {
    const [org, unit] = args as [OrgRecord, UnitRecord];
    let lease: LocalLease;
    try {
      lease = (await this.node.wake(org, unit)) as LocalLease;
    } catch (err) {
      sendJson(res, 200, { error: encodeError(err) });
      return;
    }
    const id = randomUUID();
    this.leases.set(id, { lease });
    const release = () => {
      this.leases.delete(id);
      lease.release();
    };
    // The hold is the request's: the API releases by ending it, and dies releasing it.
    res.once("close", release);
    if (res.destroyed) return release();
    res.writeHead(200, { "content-type": NDJSON, "cache-control": "no-store" });
    res.write(line({ lease: id, booted: lease.booted }));
  }

  /**
   * An API process's session: its first line names it; the API then releases the leases it took in
   * it by lines `{"release": id}`, and every one of them is released when the session ends (the API
   * process died, or the connection broke).
   */
  private openSession(socket: Socket, head: Buffer): void {
    const session: Session = {
      id: randomUUID(),
      socket,
      leases: new Set(),
      waking: new Set(),
      releasedEarly: new Set(),
    };
    this.sessions.set(session.id, session);
    socket.once("close", () => {
      this.sessions.delete(session.id);
      for (const id of session.leases) this.releaseLease(id);
    });
    // node:http's sockets are half-open: the API's end of the session (its process died, say) ends it.
    socket.once("end", () => socket.destroy());
    socket.setNoDelay(true);
    // An API host that vanished (power, a firewall's dropped state) ends its session too.
    socket.setKeepAlive(true, 10_000);
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: ${SESSION_UPGRADE}\r\n\r\n`);
    socket.write(`${JSON.stringify({ session: session.id })}\n`);
    // Lines are ASCII JSON: each chunk decodes on its own (node:http forbids setEncoding here).
    let buffered = head.toString("latin1");
    const onLines = () => {
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const id = (safeJson(buffered.slice(0, nl)) as { release?: unknown } | undefined)?.release;
        buffered = buffered.slice(nl + 1);
        if (typeof id !== "string") continue;
        if (session.leases.has(id)) this.releaseLease(id);
        else if (session.waking.has(id)) session.releasedEarly.add(id);
      }
      if (buffered.length > MAX_SESSION_LINE) socket.destroy();
    };
    socket.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("latin1");
      onLines();
    });
    onLines();
  }

  private releaseLease(id: string): void {
    const held = this.leases.get(id);
    if (!held) return;
    this.leases.delete(id);
    held.session?.leases.delete(id);
    held.lease.release();
  }

  /**
   * A wake in a session (`GET /node/v1/wake`, the records in `x-ums-args`; or a standby
   * connection's line): the unit is woken and held until the session releases the lease; with
   * `agent` (the default) the connection then is the lease's first to the unit's agent, after the
   * reply's preface (a 101 with the lease in `x-ums-lease` and `x-ums-booted`, or a line
   * `{"lease", "booted"}`); without, the reply is `{"result": {lease, booted}}`. A refusal is the
   * error as JSON.
   */
  private async wakeOn(
    socket: Socket,
    sessionId: string,
    records: () => [OrgRecord, UnitRecord],
    agent: boolean,
    head: Buffer,
    reply: SpliceReply,
    chosenId?: string,
  ): Promise<void> {
    const session = this.sessions.get(sessionId);
    if (!session) return reply.end(409, { error: encodeError(new SessionGoneError()) });
    if (chosenId === undefined) return this.wakeHeldBy(socket, session, randomUUID(), records, agent, head, reply);
    if (this.leases.has(chosenId) || session.waking.has(chosenId)) {
      return reply.end(400, { error: encodeError(new Error(`lease: '${chosenId}' is in use already`)) });
    }
    session.waking.add(chosenId);
    try {
      await this.wakeHeldBy(socket, session, chosenId, records, agent, head, reply);
    } finally {
      session.waking.delete(chosenId);
      session.releasedEarly.delete(chosenId);
    }
  }

  /** wakeOn's wake, once its session is known, its lease to be named `id`. */
  private async wakeHeldBy(
    socket: Socket,
    session: Session,
    id: string,
    records: () => [OrgRecord, UnitRecord],
    agent: boolean,
    head: Buffer,
    reply: SpliceReply,
  ): Promise<void> {
    let org: OrgRecord;
    let unit: UnitRecord;
    try {
      [org, unit] = records();
    } catch (err) {
      return reply.end(400, { error: encodeError(err) });
    }
    // The API may give up while the unit wakes (its wait is bounded): its end of this connection,
    // seen meanwhile, means no one will learn the lease, which must not then hold the unit. What the
    // API sends before the answer (its first call, behind a standby wake) is kept for the agent.
    let gone = false;
    const early: Buffer[] = [];
    let earlyBytes = 0;
    // Bounded: a call behind the wake may be an upload; past MAX_EARLY_BYTES its bytes wait in the
    // sockets (TCP's back-pressure) until the agent takes them.
    const onData = (b: Buffer) => {
      early.push(b);
      earlyBytes += b.length;
      if (earlyBytes >= MAX_EARLY_BYTES) socket.pause();
    };
    // Issue #16: a wake waiting for a running slot leaves the queue then.
    const giveUp = new AbortController();
    const onGone = () => {
      gone = true;
      giveUp.abort();
    };
    socket.on("data", onData);
    socket.once("end", onGone);
    socket.once("close", onGone);
    const stopWatching = () => {
      socket.off("data", onData);
      socket.off("end", onGone);
      socket.off("close", onGone);
      socket.pause();
    };
    let lease: LocalLease;
    try {
      lease = (await this.node.wake(org, unit, { signal: giveUp.signal })) as LocalLease;
    } catch (err) {
      stopWatching();
      return reply.end(200, { error: encodeError(err) });
    }
    this.leases.set(id, { lease, session });
    session.leases.add(id);
    // Or the API released it before it learnt it was held (a pipelined wake), or while the agent's
    // connection was being made.
    const abandoned = () =>
      gone ||
      socket.destroyed ||
      !this.sessions.has(session.id) ||
      session.releasedEarly.has(id) ||
      !this.leases.has(id);
    // The session ended, or the API gave up, while the unit woke: nothing holds the lease any more.
    if (abandoned()) {
      stopWatching();
      this.releaseLease(id);
      socket.destroy();
      return;
    }
    if (!agent) {
      stopWatching();
      return reply.end(200, { result: { lease: id, booted: lease.booted } });
    }
    let target: RelaySocket;
    try {
      target = await lease.agentSocket();
    } catch (err) {
      stopWatching();
      this.releaseLease(id);
      return reply.end(200, { error: encodeError(err) });
    }
    stopWatching();
    if (abandoned()) {
      target.socket.destroy();
      this.releaseLease(id);
      socket.destroy();
      return;
    }
    this.join(socket, target, Buffer.concat([head, ...early]), reply.preface({ id, booted: lease.booted }));
  }

  /**
   * A connection an API process opened ahead of need (`GET /node/v1/standby`): answered 101 at once,
   * it waits for one line, `{"wake": {"session", "records": [org, unit], "agent"}}`, and goes on as
   * that wake (its reply in lines: lineReply). It saves a wake its connection and its HTTP exchange.
   */
  private standby(socket: Socket, head: Buffer): void {
    socket.setNoDelay(true);
    // An API host that vanished ends it (it may wait long: it is kept until used).
    socket.setKeepAlive(true, 10_000);
    this.spliced.add(socket);
    socket.once("close", () => this.spliced.delete(socket));
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: ${SPLICE_UPGRADE}\r\n\r\n`);
    if (head.length > 0) socket.unshift(head);
    readLine(socket, MAX_CALL_BYTES)
      .then(
        (line) => {
          const reply = lineReply(socket);
          const wake = (
            safeJson(line) as { wake?: { session?: unknown; records?: unknown; agent?: unknown; lease?: unknown } }
          )?.wake;
          if (typeof wake?.session !== "string" || !Array.isArray(wake.records) || wake.records.length !== 2) {
            return reply.end(400, {
              error: encodeError(new Error('a standby connection takes one line {"wake": {...}}')),
            });
          }
          if (wake.lease !== undefined && (typeof wake.lease !== "string" || !LEASE_ID.test(wake.lease))) {
            return reply.end(400, { error: encodeError(new Error("lease: 8-64 letters, digits or dashes")) });
          }
          const records = wake.records as [OrgRecord, UnitRecord];
          return this.wakeOn(
            socket,
            wake.session,
            () => records,
            wake.agent !== false,
            Buffer.alloc(0),
            reply,
            wake.lease,
          );
        },
        () => socket.destroy(),
      )
      .catch((err: unknown) => {
        this.log.warn({ err }, "node endpoint: a standby wake failed");
        socket.destroy();
      });
  }

  private async splice(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? "/", "http://node");
    const reply = httpReply(socket);
    const refuse = (status: number, err: unknown) => reply.end(status, { error: encodeError(err) });
    if (!this.authorized(req)) return refuse(401, new Error("the node secret is missing or wrong"));
    if (url.pathname === `${NODE_PREFIX}/session` && req.headers.upgrade === SESSION_UPGRADE) {
      return this.openSession(socket, head);
    }
    if (url.pathname === `${NODE_PREFIX}/standby` && req.headers.upgrade === SPLICE_UPGRADE) {
      return this.standby(socket, head);
    }
    if (url.pathname === `${NODE_PREFIX}/send` && req.headers.upgrade === SEND_UPGRADE) {
      const args = headerArgs(req);
      if (!Array.isArray(args) || args.length !== 3 || !Array.isArray(args[2])) {
        return refuse(400, new Error("x-ums-args: the base64url of a JSON [unitId, checkpointId, have] expected"));
      }
      return this.sendRaw(socket, String(args[0]), String(args[1]), (args[2] as unknown[]).map(String), refuse);
    }
    if (url.pathname === `${NODE_PREFIX}/wake` && req.headers.upgrade === SPLICE_UPGRADE) {
      const records = (): [OrgRecord, UnitRecord] => {
        const args = headerArgs(req);
        if (args === undefined) throw new Error("x-ums-args: the base64url of a JSON [org, unit] expected");
        return args as [OrgRecord, UnitRecord];
      };
      const session = String(req.headers["x-ums-session"] ?? "");
      return this.wakeOn(socket, session, records, url.searchParams.get("agent") !== "0", head, reply);
    }
    const m = /^\/node\/v1\/leases\/([^/]+)\/(agent|http)$/.exec(url.pathname);
    if (!m || req.headers.upgrade !== SPLICE_UPGRADE) {
      return refuse(404, new Error(`no splice at ${url.pathname}`));
    }
    const held = this.leases.get(m[1] as string);
    if (!held) return refuse(404, new Error("that lease was released (or this node restarted)"));
    let target: Socket | RelaySocket;
    try {
      if (m[2] === "agent") target = await held.lease.agentSocket();
      else {
        const port = Number(url.searchParams.get("port"));
        if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error("port: an integer 1-65535");
        const { host } = await held.lease.httpTarget();
        target = await connectTcp(host, port);
      }
    } catch (err) {
      return refuse(502, err);
    }
    this.join(socket, target, head, reply.preface());
  }

  /**
   * Writes `preface` (the 101, or a line) and relays bytes both ways between `socket` and `target`:
   * a unit's agent (a RelaySocket: its bytes go from its own buffers) or a unit's port.
   */
  private join(socket: Socket, target: Socket | RelaySocket, head: Buffer, preface: string): void {
    const relay = target instanceof RelaySocket ? target : undefined;
    const to = relay ? relay.socket : (target as Socket);
    if (socket.destroyed) {
      to.destroy();
      return;
    }
    socket.write(preface);
    if (head.length > 0) to.write(head);
    this.spliced.add(socket);
    to.on("error", () => socket.destroy());
    socket.on("error", () => to.destroy());
    socket.once("close", () => {
      this.spliced.delete(socket);
      to.destroy();
    });
    // Half-closes pass through (a tunnel's end of stream): pipe ends the other side's writes.
    socket.pipe(to);
    if (relay) {
      // The agent's end may be read while its last bytes are still being written to `socket`: its
      // close must not cut them (pumpTo ends `socket` once they are written, or destroys both).
      relay.pumpTo(socket, Buffer.alloc(0), () => {}).catch(() => socket.destroy());
    } else {
      to.once("close", () => socket.destroy());
      to.pipe(socket);
    }
  }
}

/** How a splice answers: an upgrade's HTTP, or lines on a standby connection. */
interface SpliceReply {
  /** A refusal, an error or an agent-less wake's result, after which the connection ends. */
  end(status: number, body: { error: WireError } | { result: unknown }): void;
  /** What goes before the relayed bytes (a wake's names its lease). */
  preface(lease?: { id: string; booted: boolean }): string;
}

function httpReply(socket: Socket): SpliceReply {
  return {
    end(status, body) {
      const text = JSON.stringify(body);
      socket.end(
        `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\ncontent-type: application/json\r\n` +
          `content-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
    },
    preface(lease) {
      const named = lease ? `x-ums-lease: ${lease.id}\r\nx-ums-booted: ${lease.booted ? 1 : 0}\r\n` : "";
      return `HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: ${SPLICE_UPGRADE}\r\n${named}\r\n`;
    },
  };
}

function lineReply(socket: Socket): SpliceReply {
  return {
    end: (_status, body) => socket.end(`${JSON.stringify(body)}\n`),
    preface: (lease) => (lease ? `${JSON.stringify({ lease: lease.id, booted: lease.booted })}\n` : ""),
  };
}

function connectTcp(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port, allowHalfOpen: true });
    const timer = setTimeout(
      () => s.destroy(Object.assign(new Error("connect timed out"), { code: "ETIMEDOUT" })),
      TARGET_CONNECT_MS,
    );
    s.once("connect", () => {
      clearTimeout(timer);
      s.removeAllListeners("error");
      resolve(s);
    });
    s.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The JSON in a request's `x-ums-args` header (base64url), or undefined when it has none that parses. */
function headerArgs(req: IncomingMessage): unknown {
  return safeJson(Buffer.from(String(req.headers["x-ums-args"] ?? ""), "base64url").toString("utf8"));
}

function line(ev: StreamEvent): string {
  return `${JSON.stringify(ev)}\n`;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function parseJson<T>(text: string | null, what: string): T {
  try {
    if (text === null) throw new Error("missing");
    return JSON.parse(text) as T;
  } catch {
    throw new Refused(400, `${what}: JSON expected`);
  }
}

async function readArgs(req: IncomingMessage): Promise<unknown[]> {
  let text: string;
  try {
    text = await readLimited(req, MAX_CALL_BYTES);
  } catch {
    throw new Refused(413, `a call's body is at most ${MAX_CALL_BYTES} bytes`);
  }
  const body = parseJson<{ args?: unknown }>(text, "body");
  if (!Array.isArray(body.args)) throw new Refused(400, 'body: {"args": [...]} expected');
  return body.args;
}

/** Answers with NDJSON: each progress message, then the result or the error. */
async function streamed(
  res: ServerResponse,
  work: (progress: (m: string) => void, event: (ev: StreamEvent) => void) => Promise<unknown>,
): Promise<void> {
  res.writeHead(200, { "content-type": NDJSON, "cache-control": "no-store" });
  res.flushHeaders();
  const event = (ev: StreamEvent) => {
    if (!res.destroyed) res.write(line(ev));
  };
  const progress = (m: string) => event({ progress: m });
  let ev: StreamEvent;
  try {
    const result = await work(progress, event);
    ev = { result: result === undefined ? null : result };
  } catch (err) {
    ev = { error: encodeError(err) };
  }
  res.end(line(ev));
}
