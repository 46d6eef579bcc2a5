import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { ImageArchiveError } from "./errors.js";
import { TarEvent, TarFormatError, type TarHeader, TarParser } from "./tar-parser.js";

export type { TarHeader } from "./tar-parser.js";

/**
 * What is done with an entry's data ({@link ReadTarOptions.onEntry}); what it lacks is skipped. A
 * method may return a promise, waited for before the archive is read on.
 */
export interface EntrySink {
  /**
   * A piece of the entry's data: a view of the input's memory, valid until this call (or the
   * promise it returns) is done: copy what is kept longer.
   */
  data?(chunk: Buffer): void | Promise<void>;
  /** Instead of `data`, if it has it: the piece is bytes `start` to `end` of `buf` (no view made). */
  dataRange?(buf: Buffer, start: number, end: number): void;
  /** All of the entry's data was given. */
  end?(): void | Promise<void>;
  /** The entry will not be completed (an error, an abort): release what it holds. Must not throw. */
  abort?(): void;
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

/**
 * Reads the first `n` bytes of `input` (fewer if it is shorter) and gives back all of it, as an
 * iterable (read once; it closes the input when it ends, or is ended early), or closes it (`close`).
 */
async function peek(
  input: AsyncIterable<Buffer | string>,
  n: number,
): Promise<{ head: Buffer; chunks: AsyncGenerator<Buffer>; close: () => Promise<void> }> {
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
      const chunk = Buffer.from(r.value); // a copy: the input may use its memory again
      chunks.push(chunk);
      size += chunk.length;
    }
  } catch (err) {
    await it.return?.();
    throw err;
  }
  const head = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
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
  const close = async () => {
    await it.return?.();
  };
  return { head, chunks: all(), close };
}

/** Closes `input` (a stream: its file) when it will not be read. */
export function destroyInput(input: unknown): void {
  const destroy = (input as { destroy?: unknown } | null)?.destroy;
  if (typeof destroy === "function") destroy.call(input);
}

/** The error for tar data a {@link TarParser} refused: truncated, or not a tar archive. */
export function tarFormatProblem(what: string, err: TarFormatError): ImageArchiveError {
  const truncated = /unexpected end/i.test(err.message);
  return new ImageArchiveError(
    truncated ? `${what} is truncated` : `${what} is not a valid tar archive (${err.message})`,
    {
      cause: err,
    },
  );
}

function isZlibError(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && code.startsWith("Z_");
}

export interface ReadTarOptions {
  /** What the data is, for messages: "the archive", "the layer". */
  what: string;
  /** Called for each entry in turn, with its header; what it returns is given the entry's data. */
  onEntry: (header: TarHeader) => EntrySink | undefined | Promise<EntrySink | undefined>;
  /** Throws to stop (an abort): called before the input is read, before each entry and each piece of data. */
  checkAbort?: () => void;
  /** Whether the data is hashed for the diff_id it returns (default true). */
  hash?: boolean;
}

/** Output chunks of gunzip: large ones, fewer round trips. */
const GUNZIP_CHUNK = 256 * 1024;

function isPromise<T>(v: T | Promise<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | undefined)?.then === "function";
}

/**
 * Reads the tar archive `input` (plain or gzip, told by its first bytes) entry by entry, streaming:
 * the entries of each chunk of input are handled synchronously, one after the other, unless a
 * handler returns a promise. `input` may use a chunk's memory again once the next one is asked for. Returns the sha256 digest (`sha256:<hex>`) of the plain tar data (unless `opts.hash` is false) and
 * its compression. Corrupt data (bad gzip, bad tar headers, truncated) and zstd/xz/bzip2 compression
 * are an {@link ImageArchiveError}; errors of `onEntry` (and of its sinks) and of reading `input`
 * propagate as they are. `input` is read to its end or destroyed (closed), whatever happens.
 */
export async function readTar(
  input: AsyncIterable<Buffer | string>,
  opts: ReadTarOptions,
): Promise<{ diffId: string | undefined; compression: "none" | "gzip" }> {
  try {
    opts.checkAbort?.();
  } catch (err) {
    destroyInput(input);
    throw err;
  }
  const { head, chunks, close } = await peek(input, 6);
  const compression = sniffCompression(head);
  if (compression !== "none" && compression !== "gzip") {
    await close();
    throw unsupportedCompression(opts.what, compression);
  }
  const hash = opts.hash === false ? undefined : createHash("sha256");
  let feedError: unknown;
  let formatError: TarFormatError | undefined;
  let entryError: unknown;

  const consume = async (chunks: AsyncIterable<Buffer>): Promise<void> => {
    const parser = new TarParser();
    let sink: EntrySink | undefined;
    let inEntry = false;
    let reading = true; // false while a chunk is handled: an error then is not the input's
    let inHandler = false; // an error then is the entry's
    try {
      for await (const chunk of chunks) {
        reading = false;
        hash?.update(chunk);
        parser.push(chunk);
        // The handlers are called as they are, no promise in between unless they return one.
        for (let ev = parser.next(); ev !== TarEvent.Need; ev = parser.next()) {
          if (ev !== TarEvent.End) opts.checkAbort?.();
          inHandler = true;
          if (ev === TarEvent.Entry) {
            inEntry = true;
            sink = undefined;
            const r = opts.onEntry(parser.header);
            sink = isPromise(r) ? await r : r;
          } else if (ev === TarEvent.Data) {
            if (sink?.dataRange) sink.dataRange(parser.dataBuffer, parser.dataStart, parser.dataEnd);
            else {
              const r = sink?.data?.(parser.chunk);
              if (isPromise(r)) await r;
            }
          } else {
            const s = sink;
            sink = undefined;
            inEntry = false;
            const r = s?.end?.();
            if (isPromise(r)) await r;
          }
          inHandler = false;
        }
        reading = true;
      }
      reading = false;
      parser.end();
    } catch (err) {
      if (reading) feedError = err;
      else if (inHandler) entryError = err;
      else if (err instanceof TarFormatError) formatError = err;
      if (inEntry) sink?.abort?.();
      throw err;
    }
  };

  try {
    if (compression === "gzip") {
      // Copied: gunzip may still read a chunk when the next one is asked for.
      const copies = (async function* () {
        for await (const c of chunks) yield Buffer.from(c);
      })();
      const stream = Readable.from(copies, { objectMode: false });
      await pipeline(stream, createGunzip({ chunkSize: GUNZIP_CHUNK }), consume);
    } else {
      await consume(chunks); // as it is: no stream in between
    }
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
    if (formatError !== undefined) throw tarFormatProblem(opts.what, formatError);
    throw entryError ?? err;
  }
  return { diffId: hash && `sha256:${hash.digest("hex")}`, compression };
}
