import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";

/**
 * A temporary directory for the enclosing suite (call it inside `describe`): made before its first
 * test, removed with everything in it after its last. Returns the directory's path (once made).
 */
export function suiteTempDir(prefix: string): () => string {
  let dir: string | undefined;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return () => {
    if (!dir) throw new Error("the suite's temporary directory is not made yet");
    return dir;
  };
}
