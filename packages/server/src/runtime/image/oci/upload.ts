import { open } from "node:fs/promises";
import type { Readable } from "node:stream";
import type { GrowingFile } from "./growing-file.js";

/**
 * The upload is written in writes of this size, not in one per chunk of the request (64 KiB): each
 * write is a round trip to the thread pool.
 */
const UPLOAD_WRITE = 1024 * 1024;

export interface ReceiveArchiveOptions {
  signal?: AbortSignal;
  /** Told how far the file is written, and when it is whole or failed (readers follow it). */
  growing?: GrowingFile;
  /** Each chunk of the body, in order, as it comes (valid only during the call). */
  onChunk?: (chunk: Buffer) => void;
}

/**
 * Writes the request body `body` to the new file `path` in writes of {@link UPLOAD_WRITE} bytes,
 * gathered in two buffers used in turn (one is written while the other fills). Rejects when the
 * body fails (the client left halfway) or `signal` aborts; the caller removes the file.
 */
export async function receiveArchive(body: Readable, path: string, opts: ReceiveArchiveOptions = {}): Promise<void> {
  const { signal, growing, onChunk } = opts;
  const fh = await open(path, "w", 0o600);
  const one = Buffer.allocUnsafe(UPLOAD_WRITE);
  const other = Buffer.allocUnsafe(UPLOAD_WRITE);
  let fill = one; // the buffer being filled
  let used = 0;
  let written = 0;
  let writing: Promise<void> = Promise.resolve(); // the write of the other one
  const flush = async (): Promise<void> => {
    await writing;
    const buf = fill;
    const n = used;
    writing = (async () => {
      for (let off = 0; off < n; ) off += (await fh.write(buf, off, n - off)).bytesWritten;
      written += n;
      growing?.grew(written);
    })();
    writing.catch(() => {}); // awaited by the next flush, or at the end
    fill = buf === one ? other : one;
    used = 0;
  };
  let whole = false;
  try {
    signal?.throwIfAborted();
    for await (const chunk of body as AsyncIterable<Buffer>) {
      signal?.throwIfAborted();
      onChunk?.(chunk);
      for (let off = 0; off < chunk.length; ) {
        const n = chunk.copy(fill, used, off);
        used += n;
        off += n;
        if (used === UPLOAD_WRITE) await flush();
      }
    }
    if (used > 0) await flush();
    await writing;
    whole = true;
  } finally {
    await writing.catch(() => {}); // no write in flight when the file is closed
    await fh.close();
    if (whole) growing?.complete();
    else growing?.fail();
  }
}
