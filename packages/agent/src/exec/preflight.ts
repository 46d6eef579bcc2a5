import { type Stats, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";

// Checks done before spawning, so that a bad command or directory gives a clear message and the shell's
// exit codes (127 not found, 126 not executable) in pipe and PTY sessions alike (a PTY child can only
// report a failed exec through its output). Permission checks use the mode bits for the session's
// uid/gid (root may execute a file with any execute bit); ACLs and supplementary groups are not considered.

export interface SpawnFailure {
  exitCode: 126 | 127;
  message: string;
}

export type Preflight = { ok: true; file: string; cwd: string } | ({ ok: false } & SpawnFailure);

export interface Identity {
  uid: number;
  gid: number;
}

/** The execute/search permission bit. */
const X = 1;

export function canAccess(st: Stats, who: Identity, bits: number): boolean {
  if (who.uid === 0) return (bits & X) === 0 || st.isDirectory() || (st.mode & 0o111) !== 0;
  let granted: number;
  if (st.uid === who.uid) granted = (st.mode >> 6) & 7;
  else if (st.gid === who.gid) granted = (st.mode >> 3) & 7;
  else granted = st.mode & 7;
  return (granted & bits) === bits;
}

function statOrNull(path: string): Stats | null {
  try {
    // A missing file is the common case (each PATH entry before the right one): no error is made for it.
    return statSync(path, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}

export function preflight(file: string, dir: string, pathEnv: string | undefined, who: Identity): Preflight {
  const cwd = resolve(dir);
  const dst = statOrNull(cwd);
  if (!dst)
    return { ok: false, exitCode: 127, message: `ums: cannot change directory to ${cwd}: No such file or directory` };
  if (!dst.isDirectory())
    return { ok: false, exitCode: 126, message: `ums: cannot change directory to ${cwd}: Not a directory` };
  if (!canAccess(dst, who, X))
    return { ok: false, exitCode: 126, message: `ums: cannot change directory to ${cwd}: Permission denied` };

  if (file.includes("/")) {
    const full = isAbsolute(file) ? file : resolve(cwd, file);
    const st = statOrNull(full);
    if (!st) return { ok: false, exitCode: 127, message: `ums: ${file}: No such file or directory` };
    if (st.isDirectory()) return { ok: false, exitCode: 126, message: `ums: ${file}: Is a directory` };
    if (!canAccess(st, who, X)) return { ok: false, exitCode: 126, message: `ums: ${file}: Permission denied` };
    return { ok: true, file: full, cwd };
  }

  let denied: string | null = null;
  for (const entry of (pathEnv ?? "").split(delimiter)) {
    const base = entry === "" ? cwd : resolve(cwd, entry);
    const full = join(base, file);
    const st = statOrNull(full);
    if (!st || st.isDirectory()) continue;
    if (canAccess(st, who, X)) return { ok: true, file: full, cwd };
    denied ??= full;
  }
  if (denied) return { ok: false, exitCode: 126, message: `ums: ${denied}: Permission denied` };
  return { ok: false, exitCode: 127, message: `ums: ${file}: command not found` };
}
