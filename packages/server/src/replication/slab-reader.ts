import net from "node:net";
import { privateSocketPair } from "../util/private-socket-pair.js";

const MiB = 1024 * 1024;
/** Read into buffers of this size (the last of a part is shorter when the part size is not a multiple). */
export const SLAB_SIZE = 4 * MiB;

export interface SlabReaderOptions {
  /** Parts are made of whole slabs: no slab holds bytes of two parts. */
  partSize: number;
  /**
   * Slabs kept at most, filled or being filled (each {@link SLAB_SIZE}): reading pauses when the
   * next one cannot be had, until the consumer gives one back with {@link SlabReader.release}.
   */
  maxSlabs: number;
  slabSize?: number;
}

/**
 * A child's stdout read straight into reused buffers ("slabs"), for a stream that is cut into
 * parts and uploaded: the kernel copies each read into a slab where the part is being assembled
 * (`net.Socket`'s `onread` with a buffer of ours), so no buffer is allocated per read, nothing is
 * copied in this process, and the garbage collector has nothing to do. Node's own pipe reading
 * allocates a new 64 KiB buffer per read; on a 600 MiB export its allocation and collection cost
 * more CPU than the sha256 of the parts.
 *
 * The child's end is one side of a connected Unix socket pair (`privateSocketPair`: only this
 * process's user can reach its listener, and a second connection fails the open).
 *
 * Iterating yields slabs in order (views of a slab's filled bytes); every yielded slab is given
 * back with {@link release} once its bytes are no longer needed. Iteration ends at the child's EOF
 * and throws on a read error.
 */
export class SlabReader implements AsyncIterable<Buffer> {
  /** The socket to hand to the child as its stdout (`spawn`'s stdio); destroy it after the spawn. */
  readonly childEnd: net.Socket;
  private readonly socket: net.Socket;
  private readonly partSize: number;
  private readonly slabSize: number;
  private readonly maxSlabs: number;
  private readonly slabs = new Map<ArrayBuffer, Buffer>();
  private readonly free: Buffer[] = [];
  private readonly ready: Buffer[] = [];
  /** The slab being filled, its capacity (the part's remainder, at most a slab) and fill. */
  private cur: { buf: Buffer; cap: number; fill: number };
  /** The slab after `cur`: reading goes on only while one is held (see `onRead`); none means paused. */
  private next: Buffer | undefined;
  private partFill = 0;
  private ended = false;
  private error: Error | undefined;
  private wake: (() => void) | undefined;

  private constructor(socket: net.Socket, childEnd: net.Socket, opts: SlabReaderOptions, first: Buffer) {
    this.socket = socket;
    this.childEnd = childEnd;
    this.partSize = opts.partSize;
    this.slabSize = first.length;
    this.maxSlabs = Math.max(2, opts.maxSlabs);
    this.cur = { buf: first, cap: this.capacity(), fill: 0 };
    this.next = this.take();
  }

  /** Opens the socket pair; the reader reads only once the child writes. */
  static async open(opts: SlabReaderOptions): Promise<SlabReader> {
    const slabSize = Math.min(opts.slabSize ?? SLAB_SIZE, opts.partSize);
    if (!Number.isSafeInteger(opts.partSize) || opts.partSize < 1) throw new RangeError("partSize must be positive");
    if (!Number.isSafeInteger(slabSize) || slabSize < 1) throw new RangeError("slabSize must be positive");
    const first = Buffer.allocUnsafeSlow(slabSize);
    let self: SlabReader | undefined;
    const { mine, peer } = await privateSocketPair((path) =>
      net.connect({
        path,
        onread: {
          // Called once when the socket gets its handle, then after every read: where the next
          // read lands.
          buffer: () => (self ? self.target() : first),
          callback: (n: number) => (self ? self.onRead(n) : true),
        },
      }),
    );
    mine.on("error", () => {}); // reported through `error` (listen), once the reader exists
    const reader = new SlabReader(mine, peer, opts, first);
    self = reader;
    reader.slabs.set(first.buffer as ArrayBuffer, first);
    reader.listen();
    return reader;
  }

  private listen(): void {
    this.socket.on("error", (err) => this.fail(err));
    this.socket.on("end", () => {
      this.ended = true;
      if (this.cur.fill > 0) {
        this.ready.push(this.cur.buf.subarray(0, this.cur.fill));
        this.cur.fill = 0;
      }
      this.notify();
    });
    this.socket.on("close", () => {
      if (!this.ended) this.fail(new Error("the export's socket closed before its end"));
    });
    this.socket.resume(); // flowing, so that 'end' is emitted at EOF
  }

  private fail(err: Error): void {
    this.error ??= err;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Bytes the slab being started may take: the part's remainder, at most a slab. */
  private capacity(): number {
    return Math.min(this.slabSize, this.partSize - this.partFill);
  }

  /** A free slab, a new one while under the limit, or undefined. */
  private take(): Buffer | undefined {
    const b = this.free.pop();
    if (b) return b;
    if (this.slabs.size >= this.maxSlabs) return undefined;
    const n = Buffer.allocUnsafeSlow(this.slabSize);
    this.slabs.set(n.buffer as ArrayBuffer, n);
    return n;
  }

  private target(): Buffer {
    return this.cur.buf.subarray(this.cur.fill, this.cur.cap);
  }

  /**
   * `n` bytes landed in `cur`. A full slab goes to the consumer and `next` becomes `cur`. The
   * socket's next read is set right after this returns (to `target()`), so reading stops
   * (returning false) whenever there is no `next`: a paused socket keeps the last buffer it was
   * given, which must be one we still own when it resumes.
   */
  private onRead(n: number): boolean {
    this.cur.fill += n;
    this.partFill += n;
    if (this.cur.fill === this.cur.cap) {
      this.ready.push(this.cur.buf.subarray(0, this.cur.fill));
      if (this.partFill === this.partSize) this.partFill = 0;
      // biome-ignore lint/style/noNonNullAssertion: reading only goes on while `next` is held
      this.cur = { buf: this.next!, cap: this.capacity(), fill: 0 };
      this.next = this.take();
      this.notify();
    }
    return this.next !== undefined;
  }

  /** Gives back the slabs under `chunks` (views of yielded slabs) for reuse. */
  release(chunks: readonly Buffer[]): void {
    for (const c of chunks) {
      const slab = this.slabs.get(c.buffer as ArrayBuffer);
      if (!slab || this.free.includes(slab) || slab === this.cur.buf || slab === this.next) continue;
      if (!this.next) {
        this.next = slab;
        if (!this.socket.destroyed) this.socket.resume();
      } else this.free.push(slab);
    }
  }

  /** Stops reading and drops the socket (the child then gets EPIPE if it still writes). */
  close(): void {
    this.socket.destroy();
    this.childEnd.destroy();
    this.notify();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    try {
      for (;;) {
        const b = this.ready.shift();
        if (b) {
          yield b;
          continue;
        }
        if (this.error) throw this.error;
        if (this.ended) return;
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
      }
    } finally {
      if (!this.ended || this.error) this.close();
    }
  }
}
