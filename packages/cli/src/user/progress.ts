// A progress bar on stderr for transfers of more than a few MB when stderr is a terminal
// (cli-progress: it redraws in place, computes rate and ETA, and degrades on narrow terminals).

import { Transform } from "node:stream";

/** Transfers below this size get no bar. */
export const PROGRESS_MIN_BYTES = 4 * 1024 * 1024;

export interface Progress {
  /** Passes bytes through, counting them. */
  counter(): Transform;
  stop(): void;
}

const NONE: Progress = {
  counter: () => new Transform({ transform: (chunk, _enc, done) => done(null, chunk) }),
  stop: () => {},
};

export async function progress(label: string, total: number, force = false): Promise<Progress> {
  if (!force && (!process.stderr.isTTY || total < PROGRESS_MIN_BYTES)) return NONE;
  const { SingleBar, Presets } = await import("cli-progress");
  const bar = new SingleBar(
    {
      format: `${label} [{bar}] {percentage}% | {value}/{total} MB | {speed} MB/s | ETA {eta_formatted}`,
      stream: process.stderr,
      hideCursor: true,
      forceRedraw: force,
      noTTYOutput: force,
      notTTYSchedule: 200,
    },
    Presets.shades_classic,
  );
  const mb = (n: number) => Math.round(n / 104857.6) / 10;
  const started = Date.now();
  let done = 0;
  bar.start(mb(total), 0, { speed: "0" });
  return {
    counter: () =>
      new Transform({
        transform(chunk: Buffer, _enc, cb) {
          done += chunk.length;
          const s = (Date.now() - started) / 1000;
          bar.update(mb(done), { speed: s > 0 ? (done / 1048576 / s).toFixed(1) : "0" });
          cb(null, chunk);
        },
      }),
    stop: () => bar.stop(),
  };
}
