/** Runs tasks with at most `limit` at once; `idle()` resolves when none is queued or running. */
export class WorkQueue {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly drained: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    this.running++;
    try {
      return await task();
    } finally {
      this.running--;
      const next = this.waiting.shift();
      if (next) next();
      else if (this.running === 0) for (const d of this.drained.splice(0)) d();
    }
  }

  idle(): Promise<void> {
    if (this.running === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((r) => this.drained.push(r));
  }
}
