/** What went wrong in an export or an import, for a caller to tell apart without parsing messages. */
export type ReplicationErrorCode =
  /** An id (unit, checkpoint, key prefix) is not `[a-z0-9_-]{1,64}`. */
  | "INVALID_ID"
  /** A manifest in the store is malformed, inconsistent or hostile (bad ids, absurd sizes, a broken chain). */
  | "INVALID_MANIFEST"
  /** The checkpoint (or one of its chain) is not in the store. */
  | "NOT_FOUND"
  /** The parent of an incremental export has no manifest in the store: export it first. */
  | "PARENT_NOT_EXPORTED"
  /** A stored part's sha256 is not the manifest's. */
  | "CHECKSUM_MISMATCH"
  /** A stored part or stream is shorter or longer than the manifest says. */
  | "TRUNCATED"
  /** `btrfs send` or `zstd` failed while exporting. */
  | "SEND_FAILED"
  /** `zstd -d` or `btrfs receive` failed while importing, or the stream is not the one expected. */
  | "RECEIVE_FAILED"
  /** The destination already has a subvolume of that name. */
  | "EXISTS"
  /** The checkpoint's parent is neither on this host nor importable before it. */
  | "PARENT_MISSING"
  /** The object store refused or failed a request. */
  | "STORE_FAILED"
  /** The stream needs more parts than a multipart upload allows. */
  | "TOO_LARGE"
  /** The caller's AbortSignal fired. */
  | "ABORTED";

/** The one error type of this module: `code` says what went wrong, the message says where. */
export class ReplicationError extends Error {
  constructor(
    readonly code: ReplicationErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "ReplicationError";
  }
}

export function isReplicationError(err: unknown, code?: ReplicationErrorCode): err is ReplicationError {
  return err instanceof ReplicationError && (code === undefined || err.code === code);
}

/** The error to throw when `signal` fired: the signal's reason if it is already ours, else ABORTED. */
export function abortError(signal: AbortSignal | undefined, what: string): ReplicationError {
  const reason: unknown = signal?.reason;
  if (reason instanceof ReplicationError) return reason;
  return new ReplicationError("ABORTED", `${what} was cancelled`, { cause: reason });
}
