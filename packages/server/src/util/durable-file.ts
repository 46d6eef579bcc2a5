import { open, rename } from "node:fs/promises";
import { dirname } from "node:path";

// Files whose presence or content a restart relies on (a restore's journal, a delete's tombstone,
// the secrets' key ring): on disk before the step they announce. fsync(2) makes a file's data
// durable, but a new name (a create, a rename) is the directory's: it is durable once the
// directory itself is synced (Linux fsync(2), "Calling fsync() does not necessarily ensure that
// the entry in the directory containing the file has also reached disk").

/** Syncs a directory: the names made or renamed in it survive a crash. */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Replaces `path` atomically and durably: written beside it (`tmp`), synced, renamed over it, its
 * directory synced. A crash leaves the old file or the new one, never a torn one.
 */
export async function writeFileDurably(
  path: string,
  data: string,
  opts: { tmp: string; mode?: number },
): Promise<void> {
  const fh = await open(opts.tmp, "w", opts.mode ?? 0o644);
  try {
    // A leftover of an earlier try keeps its own mode: set it.
    if (opts.mode !== undefined) await fh.chmod(opts.mode);
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(opts.tmp, path);
  await syncDir(dirname(path));
}

/** Creates an empty file durably (a marker: its name is what it says; it costs no data block). */
export async function createMarkerDurably(path: string): Promise<void> {
  const fh = await open(path, "w");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
  await syncDir(dirname(path));
}
