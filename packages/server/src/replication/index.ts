// Issue #15: checkpoints exported to S3-compatible object storage and restored from it on another node.

export { type ReceiveSnapshotOptions, receiveSnapshot, sendSnapshot } from "./direct.js";
export { isReplicationError, ReplicationError, type ReplicationErrorCode } from "./errors.js";
export {
  deleteExport,
  discardExport,
  EXPORT_PART_SIZE,
  type ExportCheckpointOptions,
  type ExportProgress,
  type ExportResult,
  exportCheckpoint,
  isReceived,
  MIN_PART_SIZE,
} from "./export.js";
export { type ImportCheckpointOptions, type ImportProgress, type ImportResult, importCheckpoint } from "./import.js";
export { assertId, checkpointKeys, isValidId } from "./keys.js";
export { type Manifest, type ManifestPart, parseManifest, validateManifest } from "./manifest.js";
export { listExports, readManifest } from "./manifest-io.js";
export {
  type ObjectInfo,
  type ObjectStore,
  putStream,
  S3ObjectStore,
  type S3StoreConfig,
  type StoredPart,
  uploadParts,
} from "./object-store.js";
