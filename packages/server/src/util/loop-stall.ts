// A stalled event loop: every request, heartbeat and unit of this server waits while it is blocked,
// and nothing else says so. A timer asked every `everyMs` that comes much later than asked means the
// loop was blocked (a synchronous call, a long GC) or the process got no CPU for that long.

export interface LoopStallOpts {
  /** How often the timer is asked for (ms). */
  readonly everyMs?: number;
  /** How late it must come to be reported (ms). */
  readonly thresholdMs?: number;
}

/** Calls `onStall(ms)` after each stall of the loop of more than `thresholdMs`; returns its stop. */
export function watchLoopStalls(onStall: (lateMs: number) => void, opts: LoopStallOpts = {}): () => void {
  const every = opts.everyMs ?? 250;
  const threshold = opts.thresholdMs ?? 1000;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - every;
    last = now;
    if (late > threshold) onStall(Math.round(late));
  }, every);
  timer.unref(); // never what keeps the process alive
  return () => clearInterval(timer);
}
