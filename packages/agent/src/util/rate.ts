// Output throughput of a session over the last few seconds, for `bytes_per_second` in the session list
// (spec 2.8): bytes counted in one-second buckets over a sliding window.

export class RateMeter {
  private readonly buckets: number[];
  private lastSecond: number;
  private readonly start: number;

  constructor(
    private readonly windowSeconds = 5,
    private readonly now: () => number = Date.now,
  ) {
    this.buckets = new Array(windowSeconds).fill(0);
    this.start = now();
    this.lastSecond = Math.floor(this.start / 1000);
  }

  add(bytes: number): void {
    this.advance();
    const idx = this.lastSecond % this.windowSeconds;
    this.buckets[idx] = (this.buckets[idx] ?? 0) + bytes;
  }

  /** Bytes per second over the window (or over the session's lifetime while that is shorter). */
  perSecond(): number {
    this.advance();
    const total = this.buckets.reduce((a, b) => a + b, 0);
    const elapsed = Math.max((this.now() - this.start) / 1000, 1);
    return Math.round(total / Math.min(this.windowSeconds, elapsed));
  }

  private advance(): void {
    const sec = Math.floor(this.now() / 1000);
    if (sec === this.lastSecond) return;
    const steps = Math.min(sec - this.lastSecond, this.windowSeconds);
    for (let i = 1; i <= steps; i++) this.buckets[(this.lastSecond + i) % this.windowSeconds] = 0;
    this.lastSecond = sec;
  }
}
