// The TCP tunnel into a unit (`GET /v1/units/{name}/proxy`, websocket; @ums/protocol tunnel.ts):
// the unit's agent connects to host:port from inside the unit, and the websocket carries the bytes.

import type { TunnelAnswer } from "@ums/protocol";
import type WebSocket from "ws";
import { addQuery, type UmsClient } from "./client.js";
import { ConnectionError, errorFromResponse, SdkErrorCode, UmsError } from "./errors.js";

export interface TunnelOpts {
  /** Where the unit's agent connects (default `localhost`: the unit's own loopback). */
  host?: string | undefined;
  /** Time limit of the opening, in milliseconds (default: the client's). */
  timeoutMs?: number | undefined;
}

/** An open tunnel: `send` bytes, `end` the sending side; `data`, `close` as they come. */
export interface Tunnel {
  /** The address the agent connected to, e.g. `127.0.0.1:8080`. */
  readonly target: string;
  send(bytes: Uint8Array): void;
  /** Ends the client's side (the target reads end of stream and may still answer). */
  end(): void;
  close(): void;
  onData(fn: (bytes: Buffer) => void): void;
  /** Called once when the tunnel is over (the target ended its side, or either end closed). */
  onClose(fn: () => void): void;
  /** Whether sent bytes wait in the websocket's buffer (apply backpressure above some amount). */
  readonly bufferedAmount: number;
}

export async function openTunnel(
  client: UmsClient,
  unitPath: string,
  port: number,
  opts: TunnelOpts = {},
): Promise<Tunnel> {
  const { default: WebSocket } = await import("ws");
  const url = new URL(`${client.config.baseUrl.replace(/^http/, "ws")}${unitPath}/proxy`);
  addQuery(url, { port, host: opts.host });
  const ws = new WebSocket(url, {
    headers: { ...client.config.headers, authorization: `Bearer ${client.config.token}` },
    handshakeTimeout: (opts.timeoutMs ?? client.config.timeoutMs) || undefined,
  });
  return new Promise<Tunnel>((resolve, reject) => {
    const fail = (err: UmsError) => {
      reject(err);
      ws.terminate();
    };
    ws.once("unexpected-response", (_req, res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {}
        fail(errorFromResponse(res.statusCode ?? 0, res.statusMessage ?? "", parsed, text));
      });
    });
    ws.once("error", (err) =>
      fail(new ConnectionError(`tunnel ${url.origin}${url.pathname} failed: ${err.message}`, SdkErrorCode.Connection)),
    );
    ws.once("close", () => fail(new UmsError("the tunnel closed before it connected", SdkErrorCode.BadResponse)));
    // With the target in the query, the answer is the first message (tunnel.ts).
    ws.once("message", (data, isBinary) => {
      ws.removeAllListeners("close");
      ws.removeAllListeners("error");
      ws.on("error", () => {});
      let answer: TunnelAnswer | undefined;
      try {
        answer = isBinary ? undefined : (JSON.parse(String(data)) as TunnelAnswer);
      } catch {}
      if (answer?.status !== "connected") {
        const message =
          answer && "error" in answer
            ? answer.error
            : answer && "errors" in answer
              ? answer.errors.join("; ")
              : "no answer";
        return fail(new UmsError(`tunnel to port ${port}: ${message}`, answer?.code ?? SdkErrorCode.BadResponse));
      }
      resolve(wrap(ws, answer.target));
    });
  });
}

function wrap(ws: WebSocket, target: string): Tunnel {
  return {
    target,
    send: (bytes) => {
      if (bytes.length > 0 && ws.readyState === 1) ws.send(bytes, { binary: true });
    },
    end: () => {
      if (ws.readyState === 1) ws.send(Buffer.alloc(0), { binary: true });
    },
    close: () => ws.close(1000),
    onData: (fn) => ws.on("message", (data, isBinary) => isBinary && fn(data as Buffer)),
    onClose: (fn) => ws.once("close", () => fn()),
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
  };
}
