import { type IncomingMessage, request } from "node:http";
import type { Socket } from "node:net";
import { RelaySocket } from "../../agent/relay.js";
import type { RawSendStream } from "../../replication/direct.js";
import type { NodeRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { readLimited } from "../../util/read-limited.js";
import { parseNodeAddress } from "../directory.js";
import { NodeUnreachableError } from "../errors.js";
import { decodeError, NODE_PREFIX, SEND_UPGRADE, type WireError } from "./wire.js";

/** How long a node may take to start answering a send (its `btrfs send` starts at once). */
const SEND_HEAD_MS = 30_000;
/** A send that brings no byte this long is cut (the receive fails, leaving nothing). */
const RECEIVE_IDLE_MS = 60_000;

/** What a send asks of which node. */
interface SendRequest {
  readonly node: NodeRecord;
  readonly addr: { host: string; port: number };
  readonly unitId: string;
  readonly checkpointId: string;
  readonly have: readonly string[];
  readonly signal?: AbortSignal | undefined;
}

/** A checkpoint's send stream from another node: the parent it is incremental against, if any. */
export interface PeerStream {
  readonly parent: string | null;
  /** The raw bytes of an upgraded send, or a node's from before it (an HTTP body). */
  readonly body: RawSendStream | IncomingMessage;
}

/**
 * Issue #15: a node's way to the other nodes of its deployment (their endpoints, as the nodes
 * table has them, with the deployment's node secret): a unit moving here is received straight from
 * the node it leaves (node-endpoint.ts `POST /node/v1/send`).
 */
export class PeerNodes {
  constructor(
    private readonly store: Store,
    private readonly secret: string,
  ) {}

  /** Checkpoint `checkpointId` of the unit from node `nodeId`, incremental against one of `have` if it has one. */
  async send(
    nodeId: string,
    unitId: string,
    checkpointId: string,
    have: readonly string[],
    signal?: AbortSignal,
  ): Promise<PeerStream> {
    const node = await this.store.nodes.get(nodeId);
    const addr = node?.address ? parseNodeAddress(node.address) : undefined;
    if (!node || !addr) throw new NodeUnreachableError(`node ${nodeId} has no endpoint to send from`, nodeId);
    const ask: SendRequest = { node, addr, unitId, checkpointId, have, signal };
    return (await this.sendRaw(ask)) ?? this.sendFramed(ask);
  }

  /**
   * The send upgraded (node-endpoint.ts `sendRaw`): its bytes read into buffers of their own
   * (RelaySocket: no allocation per read, no HTTP parsing of a GiB), which a unit's first move to
   * a node spent most of its time on. Null from a node from before it (404): the caller asks again
   * the framed way.
   */
  private sendRaw({ node, addr, unitId, checkpointId, have, signal }: SendRequest): Promise<PeerStream | null> {
    const relay = new RelaySocket(addr);
    const req = request({
      createConnection: () => relay.socket,
      method: "GET",
      path: `${NODE_PREFIX}/send`,
      headers: {
        authorization: `Bearer ${this.secret}`,
        connection: "Upgrade",
        upgrade: SEND_UPGRADE,
        "x-ums-args": Buffer.from(JSON.stringify([unitId, checkpointId, have])).toString("base64url"),
      },
      ...(signal && { signal }),
    });
    return new Promise<PeerStream | null>((resolve, reject) => {
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${SEND_HEAD_MS / 1000} s`)), SEND_HEAD_MS);
      timer.unref();
      req.once("upgrade", (res, socket: Socket, head: Buffer) => {
        clearTimeout(timer);
        relay.beginRaw();
        // A sending node that stops (frozen, its host gone) must not hold the receive, and the
        // unit's lock on this node, for good.
        socket.setTimeout(RECEIVE_IDLE_MS, () =>
          socket.destroy(
            new NodeUnreachableError(`node '${node.name}' sent nothing for ${RECEIVE_IDLE_MS / 1000} s`, node.id),
          ),
        );
        // The request's signal ends the stream too (past the 101 it is the socket's, not the request's).
        if (signal?.aborted) socket.destroy();
        else signal?.addEventListener("abort", () => socket.destroy(), { once: true });
        const parent = String(res.headers["x-ums-parent"] ?? "");
        resolve({
          parent: parent === "" ? null : parent,
          body: { pumpTo: (out, look) => relay.pumpTo(out, head, look), destroy: () => socket.destroy() },
        });
      });
      req.once("response", (res) => {
        clearTimeout(timer);
        if (res.statusCode === 404) {
          res.resume();
          relay.socket.destroy();
          return resolve(null);
        }
        this.refusal(node, res).then(reject).catch(reject);
      });
      req.once("error", (err) => {
        clearTimeout(timer);
        reject(this.unreachable(node, checkpointId, err));
      });
      req.end();
    });
  }

  /** The send as an HTTP answer's body (a node from before the upgraded send). */
  private async sendFramed({ node, addr, unitId, checkpointId, have, signal }: SendRequest): Promise<PeerStream> {
    const nodeId = node.id;
    const req = request({
      host: addr.host,
      port: addr.port,
      method: "POST",
      path: `${NODE_PREFIX}/send`,
      headers: { authorization: `Bearer ${this.secret}`, "content-type": "application/json" },
      agent: false,
      ...(signal && { signal }),
    });
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${SEND_HEAD_MS / 1000} s`)), SEND_HEAD_MS);
      timer.unref();
      req.once("response", (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      req.once("error", (err) => {
        clearTimeout(timer);
        reject(this.unreachable(node, checkpointId, err));
      });
      req.end(JSON.stringify({ args: [unitId, checkpointId, have] }));
    });
    if (res.statusCode !== 200) throw await this.refusal(node, res);
    const parent = String(res.headers["x-ums-parent"] ?? "");
    // A sending node that stops (frozen, its host gone) must not hold the receive, and the unit's
    // lock on this node, for good.
    res.setTimeout(RECEIVE_IDLE_MS, () =>
      res.destroy(new NodeUnreachableError(`node '${node.name}' sent nothing for ${RECEIVE_IDLE_MS / 1000} s`, nodeId)),
    );
    return { parent: parent === "" ? null : parent, body: res };
  }

  private unreachable(node: NodeRecord, checkpointId: string, err: Error): NodeUnreachableError {
    return new NodeUnreachableError(
      `node '${node.name}' cannot be reached to send checkpoint ${checkpointId} (${(err as NodeJS.ErrnoException).code ?? err.message})`,
      node.id,
    );
  }

  /** The error a node answered instead of a send (its own, or that it answered so). */
  private async refusal(node: NodeRecord, res: IncomingMessage): Promise<Error> {
    const text = await readLimited(res, 1 << 20).catch(() => "");
    let parsed: { error?: WireError } | undefined;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return parsed?.error
      ? decodeError(parsed.error)
      : new NodeUnreachableError(`node '${node.name}' answered ${res.statusCode} to a send`, node.id);
  }
}
