/**
 * `p`'s value, or `fallback` once `ms` pass first. The timer goes as soon as either comes: a bare
 * `Promise.race([p, sleep(ms)])` left a timer behind every operation, which kept the soak and chaos
 * test processes alive up to 5 minutes after their last operation (each holding one of the test
 * runner's two slots).
 */
export async function within<T, F>(p: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<F>((r) => {
        timer = setTimeout(() => r(fallback), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
