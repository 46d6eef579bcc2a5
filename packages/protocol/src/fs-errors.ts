import { FS_RESERVED_PATH } from "./fs-reserved.js";

/**
 * The HTTP status of a failed filesystem operation, by errno name (docs/ARCHITECTURE.md section 10: fs errors
 * carry `code` and `path`). Dependency-free, so the agent bundle can import it alone.
 */
export function fsErrorStatus(code: string): number {
  if (code === "ENOENT") return 404;
  if (code === FS_RESERVED_PATH) return 403; // fs-reserved.ts: /.unit is ums's
  if (code === "ENOSPC" || code === "EDQUOT") return 507;
  if (
    [
      "EEXIST",
      "EACCES",
      "EPERM",
      "ENOTDIR",
      "EISDIR",
      "ENOTEMPTY",
      "EINVAL",
      "ELOOP",
      "ENAMETOOLONG",
      "EXDEV",
      "EROFS",
      "EBUSY",
      "ETXTBSY",
      "EFBIG",
      "EMLINK",
      "ENXIO", // opening a socket, or a FIFO without a reader
      "EOPNOTSUPP",
    ].includes(code)
  )
    return 400;
  return 500;
}
