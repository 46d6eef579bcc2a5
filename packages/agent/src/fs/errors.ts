import { constants } from "node:os";
import { fsErrorStatus } from "@ums/protocol/fs-errors";

// Failures of the filesystem operations (spec 4.4; @ums/protocol fs.ts): `{error, code, path}`
// where `code` is the errno name (or UMS_FS_RESERVED_PATH) and `path` the path as the caller named it,
// never the /proc/self/fd/N path an operation went through (guard.ts).

export class FsOpError extends Error {
  constructor(
    readonly code: string,
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

/** HTTP status of an errno name: the one table, in @ums/protocol. */
export const statusOf = fsErrorStatus;

/** Linux errno numbers libuv has no name for (node says "Unknown system error -122"). */
const UNNAMED_BY_LIBUV = new Map(
  Object.entries(constants.errno)
    .filter(([name]) => name === "EDQUOT")
    .map(([name, n]) => [n, name] as const),
);

const errnoOf = (err: unknown): string => {
  const e = err as NodeJS.ErrnoException;
  const code = e?.code;
  if (typeof code === "string" && /^E[A-Z0-9]+$/.test(code)) return code;
  // A full disk quota (the unit's disk size, issue #20) is EDQUOT, not an I/O error.
  if (typeof e?.errno === "number") return UNNAMED_BY_LIBUV.get(Math.abs(e.errno)) ?? "EIO";
  return "EIO";
};

/** Turns a node fs error into an FsOpError; `path` is used when the error names none. */
export function toFsError(err: unknown, path: string): FsOpError {
  if (err instanceof FsOpError) return err;
  const e = err as NodeJS.ErrnoException;
  const code = errnoOf(err);
  // Two-path calls (rename, symlink, copyFile) name the destination in `dest`: that is the path an
  // EEXIST, ENOTEMPTY or EISDIR is about.
  const dest = (e as { dest?: unknown })?.dest;
  const at =
    typeof dest === "string" && ["EEXIST", "ENOTEMPTY", "EISDIR"].includes(code)
      ? dest
      : typeof e?.path === "string"
        ? e.path
        : path;
  const what = e?.syscall ? `${e.syscall} ` : "";
  return new FsOpError(code, at, `${code}: ${describe(code)}, ${what}'${at}'`);
}

/** A failure of `syscall` about `shown` (the caller's path), whatever path the call itself was given. */
export function fsFailure(err: unknown, shown: string, syscall: string): FsOpError {
  if (err instanceof FsOpError) return err;
  const code = errnoOf(err);
  return new FsOpError(code, shown, `${code}: ${describe(code)}, ${syscall} '${shown}'`);
}

export function describe(code: string): string {
  const m: Record<string, string> = {
    ENOENT: "no such file or directory",
    EEXIST: "file already exists",
    EACCES: "permission denied",
    EPERM: "operation not permitted",
    ENOTDIR: "not a directory",
    EISDIR: "is a directory",
    ENOTEMPTY: "directory not empty",
    EINVAL: "invalid argument",
    ELOOP: "too many symbolic links",
    EXDEV: "cross-device link",
    ENOSPC: "no space left on device",
    EDQUOT: "disk quota exceeded: the unit's disk is full (its resources policy's disk.limit_mb)",
    EBUSY: "resource busy",
    ENAMETOOLONG: "name too long",
    ENXIO: "no such device or address",
  };
  return m[code] ?? "operation failed";
}
