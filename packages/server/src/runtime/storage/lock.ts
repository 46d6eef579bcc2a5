import { open, readFile, rm, stat } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";

export interface LockOptions {
  /** Give up after this long (default 10 minutes: an image build holds its lock for about a minute). */
  timeoutMs?: number;
  /** Polling interval while another holder has the lock (default 200 ms). */
  pollMs?: number;
  /** Called once when the lock is busy and we start waiting. */
  onWait?: (holderPid: number | undefined) => void;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Runs `fn` while holding an exclusive lock file, created with `open(path, "wx")` and holding the
 * holder's pid. Other holders (processes, or other callers in this process) wait by polling. A lock
 * left behind by a process that died is taken over.
 */
export async function withFileLock<T>(path: string, fn: () => Promise<T>, opts: LockOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 600_000);
  let waiting = false;
  for (;;) {
    try {
      const fh = await open(path, "wx", 0o644);
      try {
        await fh.writeFile(`${process.pid}\n`);
      } finally {
        await fh.close();
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const content = await readFile(path, "utf8").catch(() => undefined);
    if (content === undefined) continue; // released in between
    const pid = Number.parseInt(content, 10);
    const stale = Number.isInteger(pid) && pid > 0 ? !alive(pid) : await olderThan(path, 10_000);
    if (stale) {
      // Remove it only if it still is the same stale lock.
      if ((await readFile(path, "utf8").catch(() => undefined)) === content) await rm(path, { force: true });
      continue;
    }
    if (!waiting) {
      waiting = true;
      opts.onWait?.(Number.isInteger(pid) ? pid : undefined);
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for lock ${path} (held by pid ${content.trim()})`);
    await sleep(opts.pollMs ?? 200);
  }
  try {
    return await fn();
  } finally {
    await rm(path, { force: true });
  }
}

async function olderThan(path: string, ms: number): Promise<boolean> {
  const st = await stat(path).catch(() => undefined);
  return st !== undefined && Date.now() - st.mtimeMs > ms;
}
