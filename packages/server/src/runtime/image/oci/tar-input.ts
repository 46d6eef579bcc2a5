import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { extract } from "tar-stream";
import { ImageArchiveError } from "./errors.js";

/**
 * A tar header as tar-stream gives it (its own typing says less: `type` is null for a type it does not
 * know), with the PAX records of the entry. tar-stream applies PAX path, linkpath and size itself.
 */
export interface TarHeader {
  name: string;
  size: number;
  mode?: number;
  mtime?: Date;
  type:
    | "file"
    | "link"
    | "symlink"
    | "directory"
    | "block-device"
    | "character-device"
    | "fifo"
    | "contiguous-file"
    | null;
  linkname?: string | null;
  uid?: number;
  gid?: number;
  pax?: Record<string, string> | null;
}

/** A tar entry: its header and its data (read it, or it is skipped). */
export interface TarEntry {
  header: TarHeader;
  body: AsyncIterable<Buffer>;
}

export type Compression = "none" | "gzip" | "zstd" | "xz" | "bzip2";

/** The compression of data that starts with `head` (its first bytes, 6 are enough), by magic bytes. */
export function sniffCompression(head: Uint8Array): Compression {
  const starts = (...bytes: number[]) => bytes.every((b, i) => head[i] === b);
  if (starts(0x1f, 0x8b)) return "gzip";
  if (starts(0x28, 0xb5, 0x2f, 0xfd)) return "zstd";
  if (starts(0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00)) return "xz";
  if (starts(0x42, 0x5a, 0x68)) return "bzip2";
  return "none";
}

/** The message for a compression this module cannot read. */
export function unsupportedCompression(what: string, compression: Compression): ImageArchiveError {
  return new ImageArchiveError(
    `${what}: compression ${compression} is not supported: use docker save, or an OCI archive with uncompressed or gzip layers`,
  );
}

/** Reads the first `n` bytes of `input` (fewer if it is shorter) and gives back a stream of all of it. */
async function peek(input: AsyncIterable<Buffer | string>, n: number): Promise<{ head: Buffer; stream: Readable }> {
  const it = input[Symbol.asyncIterator]();
  const chunks: Buffer[] = [];
  let size = 0;
  let done = false;
  try {
    while (size < n) {
      const r = await it.next();
      if (r.done) {
        done = true;
        break;
      }
      const chunk = typeof r.value === "string" ? Buffer.from(r.value) : r.value;
      chunks.push(chunk);
      size += chunk.length;
    }
  } catch (err) {
    await it.return?.();
    throw err;
  }
  const head = Buffer.concat(chunks);
  async function* all(): AsyncGenerator<Buffer> {
    try {
      if (head.length > 0) yield head;
      if (done) return;
      for (let r = await it.next(); !r.done; r = await it.next()) {
        yield typeof r.value === "string" ? Buffer.from(r.value) : r.value;
      }
    } finally {
      await it.return?.();
    }
  }
  return { head, stream: Readable.from(all(), { objectMode: false }) };
}

/** Closes `input` (a stream: its file) when it will not be read. */
export function destroyInput(input: unknown): void {
  const destroy = (input as { destroy?: unknown } | null)?.destroy;
  if (typeof destroy === "function") destroy.call(input);
}

function isZlibError(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && code.startsWith("Z_");
}

export interface ReadTarOptions {
  /** What the data is, for messages: "the archive", "the layer". */
  what: string;
  /** Called for each entry in turn; its data need not be read (what is left is skipped). */
  onEntry: (entry: TarEntry) => Promise<void>;
  signal?: AbortSignal;
}

/**
 * Reads the tar archive `input` (plain or gzip, told by its first bytes) entry by entry, streaming.
 * Returns the sha256 digest (`sha256:<hex>`) of the plain tar data and its compression. Corrupt data
 * (bad gzip, bad tar headers, truncated) and zstd/xz/bzip2 compression are an
 * {@link ImageArchiveError}; errors of `onEntry` and of reading `input` propagate as they are.
 * `input` is read to its end or destroyed (closed), whatever happens.
 */
export async function readTar(
  input: AsyncIterable<Buffer | string>,
  opts: ReadTarOptions,
): Promise<{ diffId: string; compression: "none" | "gzip" }> {
  if (opts.signal?.aborted) {
    destroyInput(input);
    opts.signal.throwIfAborted();
  }
  const { head, stream } = await peek(input, 6);
  const compression = sniffCompression(head);
  if (compression !== "none" && compression !== "gzip") {
    stream.destroy();
    throw unsupportedCompression(opts.what, compression);
  }
  const hash = createHash("sha256");
  let feedError: unknown;
  let extractError: unknown;
  let entryError: unknown;

  const consume = async (chunks: AsyncIterable<Buffer>): Promise<void> => {
    const ex = extract();
    ex.on("error", (err: unknown) => {
      extractError ??= err;
    });
    // After "close", a parse error of the extractor has been seen ("error" comes first).
    const closed = new Promise<void>((resolve) => ex.once("close", () => resolve()));
    const waitDrain = () =>
      new Promise<void>((resolve) => {
        const done = () => {
          ex.off("drain", done);
          ex.off("close", done);
          resolve();
        };
        ex.on("drain", done);
        ex.on("close", done);
      });
    const feeding = (async () => {
      try {
        for await (const chunk of chunks) {
          if (ex.destroyed) return; // the reader gave up: stop reading the input
          hash.update(chunk);
          if (!ex.write(chunk) && !ex.destroyed) await waitDrain();
        }
        ex.end(undefined);
      } catch (err) {
        if (ex.destroyed) return; // what the reader's giving up did to the input: not the problem
        feedError = err;
        ex.destroy(err as Error);
      }
    })();
    try {
      for await (const entry of ex) {
        opts.signal?.throwIfAborted();
        try {
          await opts.onEntry({ header: entry.header as unknown as TarHeader, body: entry as AsyncIterable<Buffer> });
        } catch (err) {
          entryError = err;
          throw err;
        }
        for await (const _ of entry); // skip what onEntry did not read
      }
      await feeding; // done: the extractor ended when the input did
    } finally {
      // On a failure, feeding stops at its next chunk (or when the pipeline closes the input): not
      // waited for, a slow input must not hold the failure up. It never rejects.
      if (!ex.destroyed) ex.destroy();
      await closed;
    }
    if (feedError !== undefined) throw feedError;
  };

  try {
    if (compression === "gzip") await pipeline(stream, createGunzip(), consume);
    else await pipeline(stream, consume);
  } catch (err) {
    // A problem of an entry (ImageArchiveError) first; else the input's: an entry that fails while
    // reading its data mostly only passes on a failure of the input (with another error object).
    if (entryError instanceof ImageArchiveError) throw entryError;
    if (feedError !== undefined) {
      if (isZlibError(feedError)) {
        throw new ImageArchiveError(`${opts.what} is not valid gzip data (${(feedError as Error).message})`, {
          cause: feedError,
        });
      }
      throw feedError;
    }
    if (isZlibError(err)) {
      throw new ImageArchiveError(`${opts.what} is not valid gzip data (${(err as Error).message})`, { cause: err });
    }
    if (extractError !== undefined) {
      const message = (extractError as Error).message ?? String(extractError);
      const truncated = /unexpected end/i.test(message);
      throw new ImageArchiveError(
        truncated ? `${opts.what} is truncated` : `${opts.what} is not a valid tar archive (${message})`,
        { cause: extractError },
      );
    }
    throw entryError ?? err;
  }
  return { diffId: `sha256:${hash.digest("hex")}`, compression };
}
