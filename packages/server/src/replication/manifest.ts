import { ReplicationError } from "./errors.js";
import { isValidId } from "./keys.js";

export const MANIFEST_FORMAT = "ums-checkpoint-export";
export const MANIFEST_VERSION = 1;

/** The largest part accepted from a manifest: an import holds one part (and the next) in memory to check it. */
export const MAX_PART_BYTES = 256 * 1024 * 1024;
/** S3's limit on the parts of one multipart upload. */
export const MAX_PARTS = 10_000;
/** The longest chain of incremental checkpoints accepted from a manifest. */
export const MAX_CHAIN = 1000;
/** The largest manifest read from the store (10 000 parts of ~100 bytes fit well within it). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

export interface ManifestPart {
  /** Compressed bytes in this part (every part but the last has the export's part size). */
  size: number;
  /** sha256 of the part's bytes, lowercase hex. */
  sha256: string;
}

/** What the store keeps beside a checkpoint's stream: enough to check and receive it anywhere. */
export interface Manifest {
  format: typeof MANIFEST_FORMAT;
  version: typeof MANIFEST_VERSION;
  unitId: string;
  checkpointId: string;
  /** The checkpoint this stream is incremental against (`btrfs send -p`), or null for a full stream. */
  parentCheckpointId: string | null;
  /** Every checkpoint needed to restore this one, oldest (a full stream) first, this one last. */
  chain: string[];
  /** The btrfs uuid of the exported snapshot on the exporting host (for diagnostics). */
  sourceUuid: string | null;
  compression: "zstd";
  /** The `btrfs send` stream's bytes before compression (null: the exporting zstd did not say). */
  uncompressedBytes: number | null;
  /** The stored object's bytes: the sum of the parts' sizes. */
  compressedBytes: number;
  partSize: number;
  parts: ManifestPart[];
  /** ISO 8601. */
  createdAt: string;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function bad(why: string): never {
  throw new ReplicationError("INVALID_MANIFEST", `invalid manifest: ${why}`);
}

function isCount(n: unknown, max: number): n is number {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0 && n <= max;
}

/**
 * Checks a manifest read from the store, field by field (nothing in it is trusted: the store is
 * shared, and a manifest names the keys and sizes the import will use). `expectedId`, when given,
 * is the checkpoint the manifest was read for.
 */
export function validateManifest(value: unknown, expectedId?: string): Manifest {
  if (typeof value !== "object" || value === null || Array.isArray(value)) bad("not an object");
  const m = value as Record<string, unknown>;
  if (m.format !== MANIFEST_FORMAT) bad("unknown format");
  if (m.version !== MANIFEST_VERSION) bad(`unsupported version ${JSON.stringify(m.version)}`);
  if (!isValidId(m.unitId)) bad("unitId is not a valid id");
  if (!isValidId(m.checkpointId)) bad("checkpointId is not a valid id");
  if (expectedId !== undefined && m.checkpointId !== expectedId) bad(`it is for ${m.checkpointId}, not ${expectedId}`);
  if (m.parentCheckpointId !== null && !isValidId(m.parentCheckpointId)) bad("parentCheckpointId is not a valid id");
  if (!Array.isArray(m.chain) || m.chain.length < 1 || m.chain.length > MAX_CHAIN) bad("chain length");
  const chain = m.chain as unknown[];
  if (!chain.every(isValidId)) bad("chain holds an invalid id");
  if (new Set(chain).size !== chain.length) bad("chain repeats a checkpoint");
  if (chain[chain.length - 1] !== m.checkpointId) bad("chain does not end with the checkpoint");
  const parentInChain = chain.length >= 2 ? chain[chain.length - 2] : null;
  if (parentInChain !== m.parentCheckpointId) bad("chain and parentCheckpointId disagree");
  if (m.sourceUuid !== null && (typeof m.sourceUuid !== "string" || !UUID.test(m.sourceUuid))) bad("sourceUuid");
  if (m.compression !== "zstd") bad("compression");
  if (!isCount(m.partSize, MAX_PART_BYTES) || m.partSize < 1) bad("partSize");
  if (!Array.isArray(m.parts) || m.parts.length > MAX_PARTS) bad("parts");
  const parts: ManifestPart[] = [];
  let total = 0;
  for (const [i, p] of (m.parts as unknown[]).entries()) {
    if (typeof p !== "object" || p === null) bad(`part ${i + 1}`);
    const { size, sha256 } = p as Record<string, unknown>;
    if (!isCount(size, m.partSize) || size < 1) bad(`part ${i + 1} size`);
    if (i < (m.parts as unknown[]).length - 1 && size !== m.partSize) bad(`part ${i + 1} is not the part size`);
    if (typeof sha256 !== "string" || !SHA256_HEX.test(sha256)) bad(`part ${i + 1} sha256`);
    parts.push({ size, sha256 });
    total += size;
  }
  if (!isCount(m.compressedBytes, Number.MAX_SAFE_INTEGER) || m.compressedBytes !== total) {
    bad("compressedBytes is not the sum of the parts");
  }
  if (m.uncompressedBytes !== null && !isCount(m.uncompressedBytes, Number.MAX_SAFE_INTEGER)) bad("uncompressedBytes");
  if (parts.length === 0) bad("no parts");
  if (typeof m.createdAt !== "string" || Number.isNaN(Date.parse(m.createdAt)) || m.createdAt.length > 40) {
    bad("createdAt");
  }
  return {
    format: MANIFEST_FORMAT,
    version: MANIFEST_VERSION,
    unitId: m.unitId,
    checkpointId: m.checkpointId,
    parentCheckpointId: m.parentCheckpointId,
    chain: chain as string[],
    sourceUuid: m.sourceUuid,
    compression: "zstd",
    uncompressedBytes: m.uncompressedBytes,
    compressedBytes: m.compressedBytes,
    partSize: m.partSize,
    parts,
    createdAt: m.createdAt,
  };
}

/** Parses and validates manifest bytes. */
export function parseManifest(bytes: Buffer, expectedId?: string): Manifest {
  if (bytes.length > MAX_MANIFEST_BYTES) bad("too large");
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    bad("not JSON");
  }
  return validateManifest(value, expectedId);
}
