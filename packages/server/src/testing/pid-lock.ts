import { open, readFile, rm } from "node:fs/promises";

/**
 * Takes the lock file `file` for this process (created exclusively, holding its pid). False when
 * another live process holds it; a lock left by a dead process is removed so the next try wins.
 */
export async function tryPidLock(file: string): Promise<boolean> {
  try {
    const fh = await open(file, "wx");
    await fh.writeFile(String(process.pid));
    await fh.close();
    return true;
  } catch {
    const pid = Number(await readFile(file, "utf8").catch(() => "0"));
    let alive = false;
    try {
      alive = pid > 0 && process.kill(pid, 0);
    } catch {}
    if (!alive) await rm(file, { force: true });
    return false;
  }
}
