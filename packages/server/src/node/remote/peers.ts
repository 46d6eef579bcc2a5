import { type IncomingMessage, request } from "node:http";
import type { Store } from "../../store/store.js";
import { readLimited } from "../../util/read-limited.js";
import { parseNodeAddress } from "../directory.js";
import { NodeUnreachableError } from "../errors.js";
import { decodeError, NODE_PREFIX, type WireError } from "./wire.js";

/** How long a node may take to start answering a send (its `btrfs send` starts at once). */
const SEND_HEAD_MS = 30_000;
/** A send that brings no byte this long is cut (the receive fails, leaving nothing). */
const RECEIVE_IDLE_MS = 60_000;

/** A checkpoint's send stream from another node: the parent it is incremental against, if any. */
export interface PeerStream {
  readonly parent: string | null;
  readonly body: IncomingMessage;
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
        reject(
          new NodeUnreachableError(
            `node '${node.name}' cannot be reached to send checkpoint ${checkpointId} (${(err as NodeJS.ErrnoException).code ?? err.message})`,
            nodeId,
          ),
        );
      });
      req.end(JSON.stringify({ args: [unitId, checkpointId, have] }));
    });
    if (res.statusCode !== 200) {
      const text = await readLimited(res, 1 << 20).catch(() => "");
      let parsed: { error?: WireError } | undefined;
      try {
        parsed = JSON.parse(text);
      } catch {}
      throw parsed?.error
        ? decodeError(parsed.error)
        : new NodeUnreachableError(`node '${node.name}' answered ${res.statusCode} to a send`, nodeId);
    }
    const parent = String(res.headers["x-ums-parent"] ?? "");
    // A sending node that stops (frozen, its host gone) must not hold the receive, and the unit's
    // lock on this node, for good.
    res.setTimeout(RECEIVE_IDLE_MS, () =>
      res.destroy(new NodeUnreachableError(`node '${node.name}' sent nothing for ${RECEIVE_IDLE_MS / 1000} s`, nodeId)),
    );
    return { parent: parent === "" ? null : parent, body: res };
  }
}
