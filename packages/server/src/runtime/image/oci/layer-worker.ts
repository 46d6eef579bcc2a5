import { closeSync, openSync, readSync } from "node:fs";
import { type MessagePort, parentPort } from "node:worker_threads";
import { waitForBytes } from "./growing-file.js";
import { applyLayerHere } from "./layer-applier.js";
import {
  Aborted,
  type AckMessage,
  type ApplyReply,
  type ApplyRequest,
  type ChunkMessage,
  InputFailed,
  serializeError,
} from "./worker-messages.js";

/*
 * The worker thread of applyLayer (apply-layer.ts): applies the layers it is asked to, one at a
 * time, with synchronous filesystem calls (they block this thread only).
 */

/** A layer file is read in chunks of this size. */
const READ_CHUNK = 1024 * 1024;

/**
 * `size` bytes at `offset` of the file `path` (to its end if `size` is undefined), in chunks read
 * into the same memory (fresh memory for each chunk costs more than reading it). Of a file still
 * being written (`growing`), each chunk is read once it is written.
 */
async function* readRange(
  path: string,
  offset: number,
  size: number | undefined,
  growing: SharedArrayBuffer | undefined,
  checkAbort: () => void,
): AsyncGenerator<Buffer> {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.allocUnsafe(READ_CHUNK);
    let pos = offset;
    let left = size ?? Number.POSITIVE_INFINITY;
    while (left > 0) {
      const want = Math.min(buf.length, left);
      if (growing !== undefined) waitForBytes(growing, pos + want, checkAbort);
      const n = readSync(fd, buf, 0, want, pos);
      if (n === 0) return;
      pos += n;
      left -= n;
      yield buf.subarray(0, n);
    }
  } finally {
    closeSync(fd);
  }
}

/** The chunks of a layer sent over `port`, as an async iterable. */
class PortSource implements AsyncIterable<Buffer> {
  private readonly queue: Buffer[] = [];
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly port: MessagePort) {
    port.on("message", (m: ChunkMessage) => {
      if (m.type === "chunk") this.queue.push(Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength));
      else if (m.type === "end") this.ended = true;
      else if (m.type === "input-error") this.failure ??= new InputFailed("the layer could not be read");
      else this.failure = new Aborted("aborted");
      this.wake?.();
    });
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        if (this.failure instanceof Aborted) throw this.failure;
        const chunk = this.queue.shift();
        if (chunk !== undefined) {
          this.port.postMessage({ type: "ack", bytes: chunk.length } satisfies AckMessage);
          yield chunk;
          continue;
        }
        if (this.failure) throw this.failure;
        if (this.ended) return;
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
      }
    } finally {
      this.destroy();
    }
  }

  /** Tells the sender to stop (the port closes). */
  destroy(): void {
    this.port.close();
  }
}

async function apply(req: ApplyRequest): Promise<ApplyReply> {
  const flag = new Int32Array(req.abort);
  const checkAbort = () => {
    if (Atomics.load(flag, 0) !== 0) throw new Aborted("aborted");
  };
  const { source } = req;
  const input =
    source.kind === "port"
      ? new PortSource(source.port)
      : readRange(source.path, source.offset ?? 0, source.size, source.growing, checkAbort);
  try {
    const stats = await applyLayerHere(req.root, input as AsyncIterable<Buffer>, {
      uidShift: req.uidShift,
      uidRange: req.uidRange,
      ...(req.expectDiffId !== undefined && { expectDiffId: req.expectDiffId }),
      ...(req.hash && { hash: true }),
      checkAbort,
    });
    return { type: "done", stats };
  } catch (err) {
    return { type: "failed", error: serializeError(err) };
  } finally {
    if (source.kind === "port") source.port.close();
    else await (input as AsyncGenerator<Buffer>).return(undefined);
  }
}

const port = parentPort;
if (port === null) throw new Error("layer-worker.js runs in a worker thread (apply-layer.ts starts it)");
port.on("message", (req: ApplyRequest) => {
  apply(req)
    .then((reply) => port.postMessage(reply))
    .catch((err: unknown) => port.postMessage({ type: "failed", error: serializeError(err) } satisfies ApplyReply))
    // Not even the failure could be sent: the thread ends, which the parent answers (apply-layer.ts "exit").
    .catch(() => process.exit(1));
});
