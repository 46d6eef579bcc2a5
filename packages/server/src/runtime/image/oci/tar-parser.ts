/*
 * A synchronous, incremental tar parser: data is pushed in chunks as it comes, and `next()` hands
 * out what it makes of it, one event at a time, without a promise or a stream per entry (a layer of
 * small files has tens of thousands of entries). Headers are read as tar-stream (3.x) reads them,
 * with its messages for broken data: ustar and GNU headers, PAX (path, linkpath, size; global
 * records as tar-stream mixes them in), GNU long names and long link names, base-256 numbers, a
 * trailing "/" as a directory of old tars, no data after a directory header.
 */

/** A tar header. `type` is null for a type this parser does not know. */
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
  uname?: string;
  gname?: string;
  devmajor?: number;
  devminor?: number;
  pax?: Record<string, string> | null;
  /** Where the entry's data starts in the (uncompressed) tar stream. */
  byteOffset?: number;
}

/** Data that is not a tar archive, or not all of one; the message is tar-stream's. */
export class TarFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TarFormatError";
  }
}

/** What {@link TarParser.next} found. */
export const TarEvent = {
  /** More data is needed (push it), or the data ended: call {@link TarParser.end}. */
  Need: 0,
  /** An entry's header: {@link TarParser.header}. Its data events and an End follow. */
  Entry: 1,
  /** A piece of the current entry's data: {@link TarParser.chunk}. */
  Data: 2,
  /** The current entry's data is complete. */
  End: 3,
} as const;
export type TarEvent = (typeof TarEvent)[keyof typeof TarEvent];

/** Long headers (PAX, GNU long names) larger than this are refused. */
const MAX_HEADER_SIZE = 4 * 1024 * 1024;
const EMPTY = Buffer.alloc(0);

type RawType = TarHeader["type"] | "pax-header" | "pax-global-header" | "gnu-long-link-path" | "gnu-long-path";
type RawHeader = Omit<TarHeader, "type"> & { type: RawType };

function overflow(size: number): number {
  const s = size & 511;
  return s && 512 - s;
}

function toType(flag: number): RawType {
  switch (flag) {
    case 0:
      return "file";
    case 1:
      return "link";
    case 2:
      return "symlink";
    case 3:
      return "character-device";
    case 4:
      return "block-device";
    case 5:
      return "directory";
    case 6:
      return "fifo";
    case 7:
      return "contiguous-file";
    case 72:
      return "pax-header";
    case 55:
      return "pax-global-header";
    case 27:
      return "gnu-long-link-path";
    case 28:
    case 30:
      return "gnu-long-path";
  }
  return null;
}

function indexOf(block: Buffer, byte: number, offset: number, end: number): number {
  for (; offset < end; offset++) if (block[offset] === byte) return offset;
  return end;
}

function decodeStr(buf: Buffer, offset: number, length: number): string {
  return buf.toString("utf8", offset, indexOf(buf, 0, offset, offset + length));
}

/** The checksum of the header block at `b` in `block`. */
function cksum(block: Buffer, b: number): number {
  let sum = 8 * 32;
  for (let i = b; i < b + 148; i++) sum += block[i] as number;
  for (let j = b + 156; j < b + 512; j++) sum += block[j] as number;
  return sum;
}

/** A base-256 number (GNU): first byte 0x80 (positive) or 0xff (negative); null otherwise. */
function parse256(buf: Buffer): number | null {
  let positive: boolean;
  if (buf[0] === 0x80) positive = true;
  else if (buf[0] === 0xff) positive = false;
  else return null;
  let sum = 0;
  for (let i = buf.length - 1, p = 1; i > 0; i--, p *= 256) {
    const byte = buf[i] as number;
    sum += (positive ? byte : 0xff - byte) * p;
  }
  return positive ? sum : -1 * sum;
}

function decodeOct(block: Buffer, offset: number, length: number): number {
  const last = offset + length;
  if ((block[offset] as number) & 0x80) return parse256(block.subarray(offset, last)) as number; // null as tar-stream has it
  let i = offset;
  while (i < last && block[i] === 32) i++; // older tars pad with spaces
  const end = indexOf(block, 32, i, last);
  while (i < end && block[i] === 0) i++;
  if (end === i) return 0;
  // Octal digits up to the end or a NUL (what parseInt reads of them); anything else as parseInt has it.
  let value = 0;
  let j = i;
  for (; j < end; j++) {
    const c = block[j] as number;
    if (c < 48 || c > 55) break;
    value = value * 8 + (c - 48);
  }
  if (j > i && (j === end || block[j] === 0)) return value;
  return Number.parseInt(block.toString("latin1", i, end), 8);
}

/** Whether `block` has `bytes` at `offset`. */
function has(block: Buffer, offset: number, bytes: readonly number[]): boolean {
  for (let i = 0; i < bytes.length; i++) if (block[offset + i] !== bytes[i]) return false;
  return true;
}

const USTAR = [0x75, 0x73, 0x74, 0x61, 0x72, 0x00]; // "ustar\0"
const GNU = [0x75, 0x73, 0x74, 0x61, 0x72, 0x20]; // "ustar "
const GNU_VERSION = [0x20, 0x00]; // " \0"

/** The header in the 512-byte block at `b` in `block`; null for a block of zeros (the end-of-archive marker). */
function decodeHeader(block: Buffer, b: number): RawHeader | null {
  let typeflag = block[b + 156] === 0 ? 0 : (block[b + 156] as number) - 48;
  const c = cksum(block, b);
  if (c === 8 * 32) return null; // the checksum of an empty block
  if (c !== decodeOct(block, b + 148, 8)) {
    throw new TarFormatError("Invalid tar header. Maybe the tar is corrupted or it needs to be gunzipped?");
  }
  let name = decodeStr(block, b, 100);
  if (has(block, b + 257, USTAR)) {
    if (block[b + 345]) name = `${decodeStr(block, b + 345, 155)}/${name}`;
  } else if (!(has(block, b + 257, GNU) && has(block, b + 263, GNU_VERSION))) {
    throw new TarFormatError("Invalid tar header: unknown format.");
  }
  if (typeflag === 0 && name.endsWith("/")) typeflag = 5; // old tars: a trailing "/" is a directory
  return {
    name,
    mode: decodeOct(block, b + 100, 8),
    uid: decodeOct(block, b + 108, 8),
    gid: decodeOct(block, b + 116, 8),
    size: decodeOct(block, b + 124, 12),
    mtime: new Date(1000 * decodeOct(block, b + 136, 12)),
    type: toType(typeflag),
    linkname: block[b + 157] === 0 ? null : decodeStr(block, b + 157, 100),
    uname: decodeStr(block, b + 265, 32),
    gname: decodeStr(block, b + 297, 32),
    devmajor: decodeOct(block, b + 329, 8),
    devminor: decodeOct(block, b + 337, 8),
    pax: null,
  };
}

/**
 * Whether the first 512 bytes of `block` are a tar header (ustar or GNU, its checksum right): what
 * a tar archive that holds an entry starts with. A block of zeros is not one.
 */
export function isTarHeader(block: Buffer): boolean {
  if (block.length < 512) return false;
  const c = cksum(block, 0);
  if (c === 8 * 32 || c !== decodeOct(block, 148, 8)) return false;
  return has(block, 257, USTAR) || (has(block, 257, GNU) && has(block, 263, GNU_VERSION));
}

/** PAX records ("LEN key=value\n"...). */
export function decodePax(buf: Buffer): Record<string, string> {
  const result: Record<string, string> = {};
  let rest = buf;
  while (rest.length) {
    let i = 0;
    while (i < rest.length && rest[i] !== 32) i++;
    const len = Number.parseInt(rest.toString("utf8", 0, i), 10);
    if (!len) return result;
    const b = rest.toString("utf8", i + 1, len - 1);
    const keyIndex = b.indexOf("=");
    if (keyIndex === -1) return result;
    result[b.slice(0, keyIndex)] = b.slice(keyIndex + 1);
    rest = rest.subarray(len);
  }
  return result;
}

/**
 * Push the data in chunks ({@link TarParser.push}), then call {@link TarParser.next} until it says
 * {@link TarEvent.Need}: a pushed chunk is not used after that (what the parser keeps of it, the
 * start of a header, it copies), so its memory may be used again for the next one.
 */
export class TarParser {
  /** The current entry's header, after {@link TarEvent.Entry}. */
  header: TarHeader = { name: "", size: 0, type: null };
  /**
   * The piece of data of a {@link TarEvent.Data}: bytes `dataStart` to `dataEnd` of `dataBuffer` (a
   * pushed chunk), valid until the next `Need`; {@link TarParser.chunk} is a view of them.
   */
  dataBuffer: Buffer = EMPTY;
  dataStart = 0;
  dataEnd = 0;

  private readonly chunks: Buffer[] = [];
  /** The chunk the parser made of what it kept (see {@link TarParser.need}), if it is still in `chunks`. */
  private kept: Buffer | undefined;
  private head = 0;
  private offset = 0;
  private buffered = 0;
  /** Bytes taken from the stream so far. */
  private shifted = 0;
  /** Bytes of the current part (data, long header or padding) still to come. */
  private missing = 0;
  private inData = false;
  private endPending = false;
  private longHeader: RawHeader | null = null;
  private pax: Record<string, string> | null = null;
  private paxGlobal: Record<string, string> | null = null;
  private gnuLongPath: string | null = null;
  private gnuLongLinkPath: string | null = null;

  /** The piece of data of a {@link TarEvent.Data}, as a view. */
  get chunk(): Buffer {
    const { dataBuffer, dataStart, dataEnd } = this;
    return dataStart === 0 && dataEnd === dataBuffer.length ? dataBuffer : dataBuffer.subarray(dataStart, dataEnd);
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
  }

  /** The next event of what was pushed. */
  next(): TarEvent {
    const ev = this.step();
    if (ev === TarEvent.Need) this.keep();
    return ev;
  }

  /**
   * While in an entry's data, right after its {@link TarEvent.Entry} or a {@link TarEvent.Data}:
   * skips the rest of the data that was not pushed yet, as if it had been (its bytes are not to be
   * pushed: the caller goes past them). Returns how many bytes that is.
   */
  skipData(): number {
    if (!this.inData || this.buffered > 0) return 0;
    const n = this.missing;
    this.shifted += n;
    this.missing = overflow(this.header.size);
    this.inData = false;
    this.endPending = true;
    return n;
  }

  /** Copies what is kept of pushed chunks, so that their memory may be used again. */
  private keep(): void {
    if (this.buffered === 0) return;
    const live = this.chunks.slice(this.head);
    if (live.length === 1 && live[0] === this.kept) return;
    const first = live[0] as Buffer;
    live[0] = first.subarray(this.offset);
    const copy = Buffer.concat(live, this.buffered);
    this.chunks.length = 0;
    this.chunks.push(copy);
    this.head = 0;
    this.offset = 0;
    this.kept = copy;
  }

  private step(): TarEvent {
    if (this.endPending) {
      this.endPending = false;
      return TarEvent.End;
    }
    for (;;) {
      if (this.missing > 0) {
        if (this.inData) {
          if (this.buffered === 0) return TarEvent.Need;
          this.takeData(this.missing);
          this.missing -= this.dataEnd - this.dataStart;
          if (this.missing === 0) {
            this.inData = false;
            this.endPending = true;
            this.missing = overflow(this.header.size);
          }
          return TarEvent.Data;
        }
        if (this.longHeader !== null) {
          if (this.missing > this.buffered) return TarEvent.Need;
          this.consumeLongHeader(this.longHeader, this.shift(this.missing));
          continue;
        }
        if (this.buffered === 0) return TarEvent.Need;
        this.takeData(this.missing); // padding, data of what is skipped
        this.missing -= this.dataEnd - this.dataStart;
        continue;
      }
      if (this.buffered < 512) return TarEvent.Need;
      if (this.consumeHeader()) return TarEvent.Entry;
    }
  }

  /** The data ended: throws when it ended inside an entry or a header. */
  end(): void {
    if (this.missing > 0 || this.buffered > 0) {
      throw new TarFormatError("Unexpected end of data");
    }
  }

  /** Reads a header block; true when it is an entry's. */
  private consumeHeader(): boolean {
    const first = this.chunks[this.head] as Buffer;
    let header: RawHeader | null;
    if (first.length - this.offset >= 512) {
      header = decodeHeader(first, this.offset); // where it is: no view, no copy
      this.takeData(512);
    } else header = decodeHeader(this.shift(512), 0);
    if (header === null) return false;
    header.byteOffset = this.shifted;
    switch (header.type) {
      case "gnu-long-path":
      case "gnu-long-link-path":
      case "pax-global-header":
      case "pax-header": {
        const size = header.size || 0;
        if (size > MAX_HEADER_SIZE) throw new TarFormatError("Header exceeds max size");
        if (!(size >= 0)) throw new TarFormatError("Invalid header");
        if (size === 0) this.consumeLongHeader(header, EMPTY);
        else {
          this.longHeader = header;
          this.missing = size;
        }
        return false;
      }
    }
    const h = header as TarHeader;
    if (this.gnuLongPath) {
      h.name = this.gnuLongPath;
      this.gnuLongPath = null;
    }
    if (this.gnuLongLinkPath) {
      h.linkname = this.gnuLongLinkPath;
      this.gnuLongLinkPath = null;
    }
    if (this.pax) {
      if (this.pax.path) h.name = this.pax.path;
      if (this.pax.linkpath) h.linkname = this.pax.linkpath;
      if (this.pax.size) h.size = Number.parseInt(this.pax.size, 10);
      h.pax = this.pax;
      this.pax = null;
    }
    if (!(h.size >= 0)) throw new TarFormatError("Invalid header");
    this.header = h;
    if (!h.size || h.type === "directory") {
      this.endPending = true; // no data (a directory's size is not the size of data)
    } else {
      this.inData = true;
      this.missing = h.size;
    }
    return true;
  }

  private consumeLongHeader(header: RawHeader, buf: Buffer): void {
    this.longHeader = null;
    this.missing = overflow(header.size || 0);
    switch (header.type) {
      case "gnu-long-path":
        this.gnuLongPath = decodeStr(buf, 0, buf.length);
        break;
      case "gnu-long-link-path":
        this.gnuLongLinkPath = decodeStr(buf, 0, buf.length);
        break;
      case "pax-global-header":
        this.paxGlobal = decodePax(buf);
        break;
      case "pax-header":
        this.pax = this.paxGlobal === null ? decodePax(buf) : { ...this.paxGlobal, ...decodePax(buf) };
        break;
    }
  }

  /** Up to `size` bytes, from the first chunk only, as {@link TarParser.dataBuffer} and its range. */
  private takeData(size: number): void {
    const buf = this.chunks[this.head] as Buffer;
    const start = this.offset;
    const rem = buf.length - start;
    const n = Math.min(size, rem);
    this.dataBuffer = buf;
    this.dataStart = start;
    this.dataEnd = start + n;
    if (n === rem) this.dropFirst();
    else this.offset += n;
    this.buffered -= n;
    this.shifted += n;
  }

  /** The first chunk is used up. */
  private dropFirst(): void {
    this.chunks[this.head] = EMPTY;
    this.head++;
    this.offset = 0;
    if (this.head === this.chunks.length) {
      this.chunks.length = 0;
      this.head = 0;
    } else if (this.head > 1024) {
      this.chunks.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Up to `size` bytes, from the first chunk only (a view, no copy). */
  private shiftFirst(size: number): Buffer {
    this.takeData(size);
    return this.chunk;
  }

  /** Exactly `size` bytes (at most what is buffered), copied together when they span chunks. */
  private shift(size: number): Buffer {
    const first = this.shiftFirst(size);
    if (first.length === size) return first;
    const parts = [first];
    let left = size - first.length;
    while (left > 0) {
      const part = this.shiftFirst(left);
      parts.push(part);
      left -= part.length;
    }
    return Buffer.concat(parts, size);
  }
}
