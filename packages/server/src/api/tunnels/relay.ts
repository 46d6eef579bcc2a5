import type { Socket } from "node:net";
import type WebSocket from "ws";

/** Bytes waiting to go to the client past which reading from the unit stops until they drain. */
const CLIENT_HIGH_WATER = 1 << 20;
/** How long a tunnel the client closed waits for its target to end before it is cut. */
export const CLOSE_GRACE_MS = 10_000;
/** What a target may still send, to nobody, once the client closed; past it the tunnel is cut. */
export const AFTER_CLOSE_BYTES = 1 << 20;

export function toBuffer(data: WebSocket.RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** A message the client sent before its tunnel was connected (it waits for it). */
export interface EarlyMessage {
  readonly data: WebSocket.RawData;
  readonly isBinary: boolean;
}

/**
 * Relays a tunnel (packages/protocol/src/tunnel.ts) between the client's websocket and the
 * connection to the agent's end, once it is connected:
 * - client → target: each binary message is written as it is; an empty one ends the client's side
 *   (the agent passes the end of stream on to the target, which may still answer). Text messages are
 *   not part of the tunnel and are ignored. A connection to the agent that cannot take more pauses
 *   the websocket until it drains.
 * - target → client: each read is one binary message; over CLIENT_HIGH_WATER bytes waiting to go to
 *   the client pause the reads until they have gone. Buffering is bounded both ways.
 * - the target ended its side: every byte it sent goes to the client, then the websocket closes 1000.
 *   The connection to the agent broke without an end (a reset, the unit stopped): closed 1011.
 * - the client closed the websocket: the target's side is ended (after the bytes already sent); the
 *   connection is cut once the target ends too, or after CLOSE_GRACE_MS, or once the target sent
 *   AFTER_CLOSE_BYTES more (it talks to nobody; those bytes are dropped) and the client's have gone.
 * `done` is called once, when both are gone.
 */
export function relayTunnel(client: WebSocket, agent: Socket, done: () => void, early: EarlyMessage[] = []): void {
  let finished = false;
  let graceTimer: NodeJS.Timeout | undefined;
  const finish = () => {
    if (finished) return;
    finished = true;
    clearTimeout(graceTimer);
    agent.destroy();
    done();
  };
  const clientOpen = () => client.readyState === client.OPEN;

  // client → target
  let waitingDrain = false;
  const fromClient = (data: WebSocket.RawData, isBinary: boolean) => {
    if (!isBinary || agent.writableEnded || agent.destroyed) return;
    const buf = toBuffer(data);
    if (buf.length === 0) {
      agent.end();
      return;
    }
    if (!agent.write(buf) && !waitingDrain) {
      waitingDrain = true;
      client.pause();
      agent.once("drain", () => {
        waitingDrain = false;
        client.resume();
      });
    }
  };
  for (const m of early) fromClient(m.data, m.isBinary);
  client.on("message", fromClient);

  // target → client
  let paused = false;
  const sent = (err?: Error) => {
    if (err) return;
    if (paused && client.bufferedAmount < CLIENT_HIGH_WATER / 2) {
      paused = false;
      agent.resume();
    }
  };
  let dropped = 0;
  agent.on("data", (chunk: Buffer) => {
    if (!clientOpen()) {
      // The client is gone: what the target still sends is dropped, a bounded amount.
      dropped += chunk.length;
      if (dropped > AFTER_CLOSE_BYTES) {
        if (agent.writableFinished) finish();
        else {
          // The client's bytes are still going out: cut once they have (a paused socket reads
          // nothing more, so no later chunk would come to check again).
          agent.pause();
          agent.once("finish", finish);
        }
      }
      return;
    }
    client.send(chunk, { binary: true }, sent);
    if (!paused && client.bufferedAmount >= CLIENT_HIGH_WATER) {
      paused = true;
      agent.pause();
    }
  });
  // A websocket paused for a drain that will not come now could not read the client's answer to the
  // close (it would wait for ws's close timeout): resumed first.
  const closeClient = (code: number, reason: string) => {
    if (!clientOpen()) return;
    client.resume();
    client.close(code, reason);
  };
  agent.once("end", () => {
    closeClient(1000, "the target closed the connection");
    finish();
  });
  agent.on("error", () => {});
  agent.once("close", () => {
    closeClient(1011, "the connection to the target broke");
    finish();
  });

  client.on("error", () => finish());
  client.once("close", () => {
    // A paused websocket's socket is paused too: nothing of the target's is read for it any more.
    if (paused) {
      paused = false;
      agent.resume();
    }
    if (agent.readableEnded || agent.destroyed) return finish();
    if (!agent.writableEnded) agent.end();
    graceTimer = setTimeout(finish, CLOSE_GRACE_MS);
    graceTimer.unref();
  });
}
