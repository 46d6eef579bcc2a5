import type { OutputStream } from "@ums/protocol/exec";

// The last N bytes of a session's output, kept with their stream ids, so that a client attaching to a
// live session (`/exec/{id}`, docs/ARCHITECTURE.md section 10) gets the recent output replayed before the live output.

export interface Chunk {
  stream: OutputStream;
  data: Buffer;
}

export class OutputRing {
  private chunks: Chunk[] = [];
  private size = 0;

  constructor(private readonly capacity: number) {}

  push(stream: OutputStream, data: Buffer): void {
    if (this.capacity <= 0 || data.length === 0) return;
    if (data.length >= this.capacity) {
      this.chunks = [{ stream, data: Buffer.from(data.subarray(data.length - this.capacity)) }];
      this.size = this.capacity;
      return;
    }
    this.chunks.push({ stream, data: Buffer.from(data) });
    this.size += data.length;
    while (this.size > this.capacity) {
      const first = this.chunks[0] as Chunk;
      const excess = this.size - this.capacity;
      if (first.data.length <= excess) {
        this.chunks.shift();
        this.size -= first.data.length;
      } else {
        first.data = first.data.subarray(excess);
        this.size -= excess;
      }
    }
  }

  /** The buffered chunks, oldest first (adjacent chunks of the same stream merged). */
  snapshot(): Chunk[] {
    const out: Chunk[] = [];
    for (const c of this.chunks) {
      const last = out[out.length - 1];
      if (last && last.stream === c.stream) last.data = Buffer.concat([last.data, c.data]);
      else out.push({ stream: c.stream, data: c.data });
    }
    return out;
  }

  get bytes(): number {
    return this.size;
  }
}
