import { chmodSync, closeSync, constants, lstatSync, openSync } from "node:fs";
import { chmod, lstat, mkdir, readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/**
 * The data dir (issue #19 finding 10; docs/SECURITY.md): its files hold the database, the master
 * key, the cookie key and the pool, so they are the host root's alone: files 0600. The directory
 * itself is 0711, not 0700: runc, as a unit's root (host uid 100000, "other" here), must traverse
 * it to reach `<data>/run/<id>` (see allowTraversal in runtime/runc/host-setup.ts); x without r
 * lists nothing and opens no name it is not given.
 */
export const DATA_DIR_MODE = 0o711;
/** Group and other bits: none on a data file. */
const LOOSE = 0o077;

/**
 * Creates the data dir, or corrects an existing one's mode, and takes group and other access from
 * every regular file directly in it (a data dir of an older version, or files made by this start
 * with the default umask). Called at server start, before and after opening everything.
 */
export async function secureDataDir(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: DATA_DIR_MODE });
  const st = await stat(dataDir);
  if (!st.isDirectory()) throw new Error(`data dir ${dataDir} is not a directory`);
  if ((st.mode & 0o7777) !== DATA_DIR_MODE) await chmod(dataDir, DATA_DIR_MODE);
  for (const e of await readdir(dataDir, { withFileTypes: true })) {
    if (!e.isFile()) continue;
    const path = join(dataDir, e.name);
    const mode = (await lstat(path).catch(() => undefined))?.mode;
    if (mode !== undefined && (mode & LOOSE) !== 0) await chmod(path, mode & 0o700);
  }
}

/**
 * Creates `path` 0600 if it does not exist and takes group and other access from it if it does:
 * for files another program then opens, keeping the mode (SQLite gives a database's `-wal` and
 * `-shm` the database's mode).
 */
export function createPrivateFile(path: string): void {
  closeSync(openSync(path, constants.O_CREAT | constants.O_WRONLY | constants.O_NOFOLLOW, 0o600));
  restrictFile(path);
}

/** Takes group and other access from `path` if it is a regular file (no-op when missing). */
export function restrictFile(path: string): void {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return;
  }
  if (st.isFile() && (st.mode & LOOSE) !== 0) chmodSync(path, st.mode & 0o700);
}
