import WebSocket from "ws";

/** A tunnel websocket (packages/protocol/src/tunnel.ts) as a test drives it. */
export interface TestTunnel {
  readonly ws: WebSocket;
  /** The server's first text message (the tunnel's answer). */
  readonly answer: Promise<Record<string, unknown>>;
  /** Every binary byte received so far. */
  received(): Buffer;
  /** Resolves once `pred` holds for what arrived so far; fails after `ms` or at the close. */
  waitFor(pred: (got: Buffer) => boolean, ms?: number): Promise<void>;
  /** Resolves once `n` bytes have arrived (without joining them: for large transfers). */
  waitBytes(n: number, ms?: number): Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;
}

/**
 * Opens `url` (ws://…/proxy) with the token and sends `init` (an object as JSON text, a string as
 * it is, nothing when undefined) as soon as it opens, then each of `data`, without waiting for the answer. Rejects when
 * the upgrade is refused, with the status in the message.
 */
export function openTestTunnel(url: string, token: string, init: unknown, data: Buffer[] = []): Promise<TestTunnel> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
    const chunks: Buffer[] = [];
    let size = 0;
    let wake: (() => void) | null = null;
    let resolveAnswer: (v: Record<string, unknown>) => void = () => {};
    const answer = new Promise<Record<string, unknown>>((r) => {
      resolveAnswer = r;
    });
    let closedNow = false;
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on("close", (code, reason) => {
        closedNow = true;
        r({ code, reason: reason.toString() });
        wake?.();
      }),
    );
    ws.on("message", (d, isBinary) => {
      if (isBinary) {
        chunks.push(d as Buffer);
        size += (d as Buffer).length;
        wake?.();
      } else resolveAnswer(JSON.parse(String(d)));
    });
    const received = () => {
      if (chunks.length > 1) chunks.splice(0, chunks.length, Buffer.concat(chunks, size));
      return chunks[0] ?? Buffer.alloc(0);
    };
    const waitUntil = async (done: () => boolean, ms: number) => {
      const deadline = Date.now() + ms;
      while (!done()) {
        if (closedNow) throw new Error(`closed; received ${size} bytes: ${received().subarray(-200)}`);
        if (Date.now() > deadline) throw new Error(`timed out; received ${size} bytes`);
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 200);
        });
        wake = null;
      }
    };
    const waitFor = (pred: (got: Buffer) => boolean, ms = 30_000) => waitUntil(() => pred(received()), ms);
    const waitBytes = (n: number, ms = 30_000) => waitUntil(() => size >= n, ms);
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => reject(new Error(`upgrade refused: ${res.statusCode} ${body}`)));
    });
    ws.on("error", (err) => {
      if (ws.readyState !== ws.OPEN) reject(err);
    });
    ws.once("open", () => {
      if (init !== undefined) ws.send(typeof init === "string" ? init : JSON.stringify(init));
      for (const d of data) ws.send(d, { binary: true });
      resolve({ ws, answer, received, waitFor, waitBytes, closed });
    });
  });
}
