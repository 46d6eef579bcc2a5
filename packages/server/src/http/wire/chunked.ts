import { HeadError } from "./head.js";

enum State {
  Size,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerLineStart,
  TrailerLine,
  TrailerLf,
  FinalLf,
  Done,
}

/** At most this many hex digits in a chunk size (2^60: no body is larger). */
const MAX_SIZE_DIGITS = 15;
/** At most this many bytes of chunk extensions and trailer fields, all together. */
const MAX_META_BYTES = 16 * 1024;

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/**
 * Finds where a chunked body ends (RFC 9112 §7.1) without changing it: the bytes are passed on as
 * they are, and this says how many of them belong to the body. Strict: CRLF only, hex sizes of at
 * most 15 digits, extensions and trailer lines without control characters, at most 16 KiB of them.
 */
export class ChunkedScanner {
  private state = State.Size;
  private digits = 0;
  private remaining = 0;
  private meta = 0;

  get done(): boolean {
    return this.state === State.Done;
  }

  /**
   * How many bytes of `chunk` (from `start`) belong to the body; fewer than all of them once the
   * body ends within it. Throws a HeadError on malformed framing.
   */
  scan(chunk: Uint8Array, start = 0): number {
    let i = start;
    const n = chunk.length;
    while (i < n && this.state !== State.Done) {
      if (this.state === State.Data) {
        const take = Math.min(this.remaining, n - i);
        this.remaining -= take;
        i += take;
        if (this.remaining === 0) this.state = State.DataCr;
        continue;
      }
      const c = chunk[i++] as number;
      switch (this.state) {
        case State.Size: {
          const v = hexValue(c);
          if (v >= 0) {
            if (++this.digits > MAX_SIZE_DIGITS) throw new HeadError("chunk size too large");
            this.remaining = this.remaining * 16 + v;
          } else if (this.digits > 0 && (c === 0x3b || c === 0x20 || c === 0x09)) {
            this.state = State.Extension;
          } else if (this.digits > 0 && c === 0x0d) {
            this.state = State.SizeLf;
          } else throw new HeadError("malformed chunk size");
          break;
        }
        case State.Extension:
          if (c === 0x0d) this.state = State.SizeLf;
          else if ((c < 0x20 && c !== 0x09) || c === 0x7f) throw new HeadError("malformed chunk extension");
          else this.countMeta();
          break;
        case State.SizeLf:
          if (c !== 0x0a) throw new HeadError("chunk size line without CRLF");
          this.digits = 0;
          this.state = this.remaining === 0 ? State.TrailerLineStart : State.Data;
          break;
        case State.DataCr:
          if (c !== 0x0d) throw new HeadError("chunk data longer than its size");
          this.state = State.DataLf;
          break;
        case State.DataLf:
          if (c !== 0x0a) throw new HeadError("chunk data without CRLF");
          this.state = State.Size;
          break;
        case State.TrailerLineStart:
          if (c === 0x0d) this.state = State.FinalLf;
          else if (c < 0x21 || c === 0x7f) throw new HeadError("malformed trailer field");
          else {
            this.countMeta();
            this.state = State.TrailerLine;
          }
          break;
        case State.TrailerLine:
          if (c === 0x0d) this.state = State.TrailerLf;
          else if ((c < 0x20 && c !== 0x09) || c === 0x7f) throw new HeadError("malformed trailer field");
          else this.countMeta();
          break;
        case State.TrailerLf:
          if (c !== 0x0a) throw new HeadError("trailer field without CRLF");
          this.state = State.TrailerLineStart;
          break;
        case State.FinalLf:
          if (c !== 0x0a) throw new HeadError("chunked body without its final CRLF");
          this.state = State.Done;
          break;
      }
    }
    return i - start;
  }

  private countMeta(): void {
    if (++this.meta > MAX_META_BYTES) throw new HeadError("chunk extensions or trailers too large");
  }
}
