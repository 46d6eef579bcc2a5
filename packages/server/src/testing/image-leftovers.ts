import { readdir } from "node:fs/promises";
import { join } from "node:path";

/**
 * What imports and image builds left: work dirs in the pool's shared `imported` dir and uploads
 * (in its `.uploads`, and in `<dataDir>/uploads`, where a server whose pool is a loop file beside
 * its data dir writes them), once those of imports that other test files run at the same time have
 * had 15 s to end: a leak of the caller's stays.
 */
export async function imageLeftovers(importedDir: string, dataDir: string): Promise<string[]> {
  const list = async (d: string) => readdir(d).catch(() => [] as string[]);
  const now = async () => [
    ...(await list(importedDir)).filter((n) => n.startsWith(".") && n !== ".uploads"),
    ...(await list(join(importedDir, ".uploads"))),
    ...(await list(join(dataDir, "uploads"))),
  ];
  for (let i = 0; i < 150 && (await now()).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
  return now();
}
