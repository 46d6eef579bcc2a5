import { readdir, readFile, readlink, realpath } from "node:fs/promises";
import { join, resolve } from "node:path";

/**
 * The `ums serve` processes on this host whose data dir is `dataDir` (read from /proc: their argv's
 * `--data-dir`, else their UMS_DATA_DIR, else `./data` in their working directory).
 */
export async function serversOn(dataDir: string): Promise<number[]> {
  const want = await realpath(dataDir).catch(() => resolve(dataDir));
  const found: number[] = [];
  for (const entry of await readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const dir = join("/proc", entry);
    const argv = (await readFile(join(dir, "cmdline"), "utf8").catch(() => "")).split("\0");
    const at = argv.indexOf("serve");
    if (at < 1 || !argv.slice(0, at).some((a) => /(?:^|\/)(?:ums|ums\.mjs|main\.js)$/.test(a))) continue;
    const flag = argv.indexOf("--data-dir");
    const inline = argv.find((a) => a.startsWith("--data-dir="))?.slice("--data-dir=".length);
    let dir0 = flag >= 0 ? argv[flag + 1] : inline;
    if (!dir0) {
      const env = (await readFile(join(dir, "environ"), "utf8").catch(() => "")).split("\0");
      dir0 = env.find((e) => e.startsWith("UMS_DATA_DIR="))?.slice("UMS_DATA_DIR=".length) || "./data";
    }
    const cwd = await readlink(join(dir, "cwd")).catch(() => "/");
    const theirs = await realpath(resolve(cwd, dir0)).catch(() => resolve(cwd, dir0));
    if (theirs === want) found.push(Number(entry));
  }
  return found;
}
