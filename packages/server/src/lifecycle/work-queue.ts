/**
 * Runs tasks with at most `limit` at once; `idle()` resolves when none is queued or running.
 * After `close()`, queued tasks are skipped (they resolve to undefined without running).
 */
export class WorkQueue {
  private running = 0;
  private closed = false;
  private readonly waiting: (() => void)[] = [];
  private readonly drained: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T | undefined> {
    if (this.running >= this.limit || this.waiting.length > 0) await new Promise<void>((r) => this.waiting.push(r));
    if (this.closed) {
      this.next();
      return undefined;
    }
    this.running++;
    try {
      return await task();
    } finally {
      this.running--;
      this.next();
    }
  }

  /** Wakes the next queued task, or tells `idle()` waiters that nothing is left. */
  private next(): void {
    const wake = this.waiting.shift();
    if (wake) wake();
    else if (this.running === 0) for (const d of this.drained.splice(0)) d();
  }

  /** Skips every queued task; those already running finish. */
  close(): Promise<void> {
    this.closed = true;
    const done = this.idle();
    if (this.running === 0) this.next();
    return done;
  }

  idle(): Promise<void> {
    if (this.running === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((r) => this.drained.push(r));
  }
}
