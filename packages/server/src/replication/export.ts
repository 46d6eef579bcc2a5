import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { run } from "../runtime/exec/host-command.js";
import { withFileLock } from "../runtime/storage/lock.js";
import { type Child, childFailure, startBackgroundChild } from "./children.js";
import { abortError, ReplicationError } from "./errors.js";
import { assertId, checkpointKeys } from "./keys.js";
import { MANIFEST_FORMAT, MANIFEST_VERSION, MAX_CHAIN, MAX_PART_BYTES, type Manifest } from "./manifest.js";
import { readManifest } from "./manifest-io.js";
import {
  isUploadGone,
  type ObjectStore,
  type StoredPart,
  StreamChangedError,
  type UploadPartsResult,
  uploadParts,
} from "./object-store.js";
import { SLAB_SIZE, SlabReader } from "./slab-reader.js";

const MiB = 1024 * 1024;
/** The size of each uploaded part: 10 000 parts (S3's limit) make a 320 GiB compressed stream. */
export const EXPORT_PART_SIZE = 32 * MiB;
/** S3's smallest part (but the last). */
export const MIN_PART_SIZE = 5 * MiB;
/** zstd's level: fast, the send stream is mostly file data that btrfs already held compressed or not. */
export const ZSTD_LEVEL = 1;

export interface ExportProgress {
  /** Compressed bytes produced so far (uploaded or found already stored). */
  compressedBytes: number;
  uploadedBytes: number;
  skippedBytes: number;
}

export interface ExportCheckpointOptions {
  store: ObjectStore;
  unitId: string;
  checkpointId: string;
  /** The checkpoint's read-only subvolume. Only `btrfs send` reads it. */
  snapshotPath: string;
  /**
   * The checkpoint it is exported incrementally against (`btrfs send -p`): it must be on this
   * host (read-only) and already exported to the same store.
   */
  parent?: { checkpointId: string; snapshotPath: string } | undefined;
  /** A host-private directory for the state of unfinished exports (made if missing). */
  stateDir: string;
  signal?: AbortSignal | undefined;
  /** {@link EXPORT_PART_SIZE} by default; at least {@link MIN_PART_SIZE}. */
  partSize?: number | undefined;
  /** Parts uploaded at once; 2 by default. */
  concurrency?: number | undefined;
  onProgress?: ((p: ExportProgress) => void) | undefined;
}

export interface ExportResult {
  manifest: Manifest;
  /** Bytes sent to the store by this call. */
  uploadedBytes: number;
  /** Bytes of parts an interrupted earlier export had stored, checked and not sent again. */
  skippedBytes: number;
  /** The checkpoint was in the store already (nothing was done). */
  alreadyExported: boolean;
  /** An interrupted export's upload was taken up again. */
  resumed: boolean;
}

/** What an unfinished export keeps on the host: enough to resume its multipart upload. */
interface ExportState {
  version: 1;
  key: string;
  uploadId: string;
  unitId: string;
  checkpointId: string;
  parentCheckpointId: string | null;
  partSize: number;
  parts: StoredPart[];
}

const statePath = (stateDir: string, checkpointId: string) => join(resolve(stateDir), `${checkpointId}.export.json`);

async function readState(path: string): Promise<ExportState | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  try {
    const s = JSON.parse(text) as ExportState;
    if (s.version !== 1 || typeof s.uploadId !== "string" || !Array.isArray(s.parts)) return undefined;
    return s;
  } catch {
    return undefined; // torn or foreign: the upload it named (if any) is left to the store's lifecycle rules
  }
}

let stateWrites = 0;
async function writeState(path: string, state: ExportState): Promise<void> {
  const tmp = `${path}.${process.pid}-${++stateWrites}.tmp`;
  await writeFile(tmp, JSON.stringify(state), { mode: 0o600 });
  await rename(tmp, path);
}

/**
 * Whether subvolume `path` was received (`btrfs receive`: from the store, or from the node a unit
 * moved from) rather than taken here: its copy in the store is its own node's to make.
 */
export async function isReceived(path: string): Promise<boolean> {
  const { stdout } = await run("btrfs", ["subvolume", "show", resolve(path)]);
  return /^\s*Received UUID:\s*[0-9a-f-]{36}\s*$/m.test(stdout);
}

/** The btrfs uuid of subvolume `path` (from `btrfs subvolume show`, which reads no file inside it). */
export async function subvolumeUuid(path: string): Promise<string | null> {
  const { stdout } = await run("btrfs", ["subvolume", "show", resolve(path)]);
  return /^\s*UUID:\s*([0-9a-f-]{36})\s*$/m.exec(stdout)?.[1] ?? null;
}

/**
 * Exports checkpoint `checkpointId` (its read-only subvolume `snapshotPath`) to the store as
 * `btrfs send [-p parent] | zstd`, streamed in parts of a multipart upload (no copy on disk), then
 * its manifest. Incremental against `parent` when given. Resumable: the state of the upload is
 * kept in `stateDir`; a later call for the same checkpoint regenerates the stream and uploads only
 * the parts not stored yet (checking those that are by sha256; if the stream differs, the upload
 * starts over). Cancelled by `signal` (ABORTED; the state is kept for a resume, or dropped with
 * {@link discardExport}). Both child processes have ended when this returns or throws.
 */
export async function exportCheckpoint(opts: ExportCheckpointOptions): Promise<ExportResult> {
  const unitId = assertId(opts.unitId, "unit id");
  const checkpointId = assertId(opts.checkpointId, "checkpoint id");
  const parentId = opts.parent ? assertId(opts.parent.checkpointId, "parent checkpoint id") : null;
  if (parentId === checkpointId) throw new ReplicationError("INVALID_ID", "a checkpoint cannot be its own parent");
  // The stream names the subvolume after the snapshot's directory entry, and an import receives it
  // only under the checkpoint's id (as `units/<unit>/checkpoints/<id>` is named already).
  if (basename(resolve(opts.snapshotPath)) !== checkpointId) {
    throw new ReplicationError("INVALID_ID", `the snapshot of ${checkpointId} must be named ${checkpointId}`);
  }
  const partSize = opts.partSize ?? EXPORT_PART_SIZE;
  if (!Number.isSafeInteger(partSize) || partSize < MIN_PART_SIZE || partSize > MAX_PART_BYTES) {
    throw new RangeError(`partSize must be ${MIN_PART_SIZE}..${MAX_PART_BYTES}`);
  }
  const stateDir = resolve(opts.stateDir);
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  return withFileLock(join(stateDir, `${checkpointId}.export.lock`), () =>
    exportLocked(opts, unitId, checkpointId, parentId, partSize, stateDir),
  );
}

async function exportLocked(
  opts: ExportCheckpointOptions,
  unitId: string,
  checkpointId: string,
  parentId: string | null,
  partSize: number,
  stateDir: string,
): Promise<ExportResult> {
  const { store, signal } = opts;
  const keys = checkpointKeys(checkpointId);
  const sp = statePath(stateDir, checkpointId);
  // Independent reads, at once: they are most of an incremental export's fixed cost.
  const [existing, parent, sourceUuid, saved] = await Promise.all([
    readManifest(store, checkpointId, { signal, missingOk: true }),
    parentId ? readManifest(store, parentId, { signal, missingOk: true }) : undefined,
    subvolumeUuid(opts.snapshotPath),
    readState(sp),
  ]);
  if (existing) {
    if (existing.unitId !== unitId || existing.parentCheckpointId !== parentId) {
      throw new ReplicationError("EXISTS", `${checkpointId} is in the store already, with another unit or parent`);
    }
    return { manifest: existing, uploadedBytes: 0, skippedBytes: 0, alreadyExported: true, resumed: false };
  }
  let chain = [checkpointId];
  if (parentId) {
    if (!parent) {
      throw new ReplicationError("PARENT_NOT_EXPORTED", `parent ${parentId} is not in the store: export it first`);
    }
    if (parent.unitId !== unitId) throw new ReplicationError("INVALID_ID", `parent ${parentId} is another unit's`);
    chain = [...parent.chain, checkpointId];
    if (chain.length > MAX_CHAIN) {
      throw new ReplicationError("TOO_LARGE", `chain longer than ${MAX_CHAIN}: export a full one`);
    }
  }

  let state = saved;
  if (state && (state.key !== keys.stream || state.parentCheckpointId !== parentId || state.partSize !== partSize)) {
    await store.abortMultipartUpload(state.key, state.uploadId, { signal }).catch(() => {}); // best effort
    await rm(sp, { force: true });
    state = undefined;
  }
  const resumed = state !== undefined && state.parts.length > 0;
  let uploadedBytes = 0;
  let skippedBytes = 0;
  for (let attempt = 1; ; attempt++) {
    // The multipart upload (and the state that lets a later call resume it) is made only once a
    // first whole part is ready: a stream that fits in one part goes with one PutObject.
    const begin = async (): Promise<string> => {
      const uploadId = await store.createMultipartUpload(keys.stream, { signal });
      state = {
        version: 1,
        key: keys.stream,
        uploadId,
        unitId,
        checkpointId,
        parentCheckpointId: parentId,
        partSize,
        parts: [],
      };
      await writeState(sp, state);
      return uploadId;
    };
    const stored = state?.parts ?? [];
    try {
      // Parts end in any order (two are in flight): the state is written by one write at a time.
      let writing: Promise<void> = Promise.resolve();
      const sent = await sendToStore(
        opts,
        { key: keys.stream, partSize, stored, upload: state?.uploadId ?? begin },
        (part) => {
          const s = state as ExportState;
          s.parts = [...s.parts.filter((p) => p.partNumber !== part.partNumber), part];
          const next = writing.then(() => writeState(sp, s));
          writing = next.catch(() => {});
          return next;
        },
      );
      uploadedBytes += sent.uploadedBytes;
      skippedBytes += sent.skippedBytes;
      const current = state as ExportState | undefined;
      if (!sent.single) {
        if (!current) throw new ReplicationError("STORE_FAILED", "parts were stored without an upload");
        await store.completeMultipartUpload(keys.stream, current.uploadId, sent.parts, { signal });
      } else if (current) {
        // An upload begun by an interrupted call that stored no part: dropped.
        await store.abortMultipartUpload(current.key, current.uploadId, { signal }).catch(() => {});
      }
      const head = await store.headObject(keys.stream, { signal });
      const total = sent.parts.reduce((n, p) => n + p.size, 0);
      if (head?.size !== total) {
        throw new ReplicationError("STORE_FAILED", `${keys.stream} holds ${head?.size} bytes, not ${total}`);
      }
      const manifest: Manifest = {
        format: MANIFEST_FORMAT,
        version: MANIFEST_VERSION,
        unitId,
        checkpointId,
        parentCheckpointId: parentId,
        chain,
        sourceUuid,
        compression: "zstd",
        uncompressedBytes: sent.uncompressedBytes,
        compressedBytes: total,
        partSize,
        parts: sent.parts.map((p) => ({ size: p.size, sha256: p.sha256 })),
        createdAt: new Date().toISOString(),
      };
      await store.putObject(keys.manifest, Buffer.from(`${JSON.stringify(manifest, null, 1)}\n`), {
        signal,
        contentType: "application/json",
      });
      await rm(sp, { force: true });
      return { manifest, uploadedBytes, skippedBytes, alreadyExported: false, resumed };
    } catch (err) {
      // The regenerated stream is not the interrupted one, or the store dropped the upload (expired,
      // aborted by a lifecycle rule): start over once, cleanly, with a new upload.
      const restart = attempt === 1 && !signal?.aborted && (err instanceof StreamChangedError || isUploadGone(err));
      if (!restart) {
        if (err instanceof StreamChangedError) throw new ReplicationError("SEND_FAILED", err.message, { cause: err });
        throw err;
      }
      const current = state as ExportState | undefined;
      if (current) await store.abortMultipartUpload(current.key, current.uploadId, { signal }).catch(() => {}); // best effort
      await rm(sp, { force: true });
      state = undefined;
    }
  }
}

/** The bytes in and out of zstd's `-vv` summary line, or undefined when it has none (another zstd). */
export function zstdCounts(stderr: string): { in: number; out: number } | undefined {
  const all = [...stderr.matchAll(/\((\d+) B => (\d+) B, /g)];
  const last = all[all.length - 1];
  if (!last) return undefined;
  const counts = { in: Number(last[1]), out: Number(last[2]) };
  return Number.isSafeInteger(counts.in) && Number.isSafeInteger(counts.out) ? counts : undefined;
}

/** Runs `btrfs send | zstd` into the upload's parts; every child has ended when it settles. */
async function sendToStore(
  opts: ExportCheckpointOptions,
  target: { key: string; partSize: number; stored: readonly StoredPart[]; upload: string | (() => Promise<string>) },
  onStored: (part: StoredPart) => Promise<void>,
): Promise<UploadPartsResult & { uncompressedBytes: number | null }> {
  const { store, signal } = opts;
  if (signal?.aborted) throw abortError(signal, `export of ${opts.checkpointId}`);
  const inner = new AbortController();
  const fail = (err: unknown) => {
    if (!inner.signal.aborted) inner.abort(err);
  };
  const onAbort = () => fail(abortError(signal, `export of ${opts.checkpointId}`));
  signal?.addEventListener("abort", onAbort, { once: true });

  // zstd's output is read straight into the parts' buffers (see SlabReader). The reader is opened
  // before send starts: between send's start and zstd's nothing may await, or this process would
  // begin reading send's stdout and take bytes meant for zstd.
  let reader: SlabReader;
  try {
    reader = await SlabReader.open({
      partSize: target.partSize,
      // Two parts in flight (by default) and one being read, and the slab after it.
      maxSlabs: Math.ceil(((Math.max(1, opts.concurrency ?? 2) + 1) * target.partSize) / SLAB_SIZE) + 2,
    });
  } catch (err) {
    signal?.removeEventListener("abort", onAbort);
    throw new ReplicationError("SEND_FAILED", `export of ${opts.checkpointId}: ${(err as Error).message}`);
  }
  const sendArgs = ["send", "-q", ...(opts.parent ? ["-p", resolve(opts.parent.snapshotPath)] : [])];
  const send = startBackgroundChild("btrfs", [...sendArgs, resolve(opts.snapshotPath)], ["ignore", "pipe", "pipe"]);
  // send's stdout is zstd's stdin, a pipe between the two: the uncompressed stream never passes
  // through this process (passing it through cost more CPU than zstd itself on a 2-CPU host).
  // -vv: zstd's last line gives the exact bytes in and out ("(N B => M B, ...)").
  let zstd: Child;
  try {
    zstd = startBackgroundChild(
      "zstd",
      ["-c", "-T0", `-${ZSTD_LEVEL}`, "-vv"],
      // biome-ignore lint/style/noNonNullAssertion: stdio is "pipe"
      [send.proc.stdout!, reader.childEnd, "pipe"],
    );
  } catch (err) {
    // A start that throws (not one that fails later: that ends in `exit`) leaves send writing to
    // a pipe nobody reads: it goes, and is waited for, before the export fails.
    send.kill();
    send.proc.stdout?.destroy();
    reader.close();
    await send.exit;
    signal?.removeEventListener("abort", onAbort);
    throw new ReplicationError("SEND_FAILED", `export of ${opts.checkpointId}: zstd: ${(err as Error).message}`);
  }
  send.proc.stdout?.destroy(); // this process's copy of the pipe's read end
  reader.childEnd.destroy(); // and of zstd's stdout: its end comes when zstd's ends
  const killAll = () => {
    send.kill();
    zstd.kill();
  };
  inner.signal.addEventListener("abort", killAll, { once: true });

  const exited = (child: typeof send, label: string) =>
    child.exit.then((e) => {
      const why = childFailure(label, e);
      if (why) {
        const err = new ReplicationError("SEND_FAILED", why);
        fail(err);
        throw err;
      }
    });
  const sendDone = exited(send, "btrfs send");
  const zstdDone = exited(zstd, "zstd");
  const progress: ExportProgress = { compressedBytes: 0, uploadedBytes: 0, skippedBytes: 0 };
  const tasks = [
    sendDone,
    zstdDone,
    uploadParts(store, target.key, target.upload, reader, {
      partSize: target.partSize,
      release: (chunks) => reader.release(chunks),
      concurrency: opts.concurrency,
      signal: inner.signal,
      stored: target.stored,
      singlePut: true,
      onStored,
      // The last (short) part only once both tools ended well: a stream cut short by a failure
      // must not be stored as if it were whole.
      beforeFinalPart: () => Promise.all([sendDone, zstdDone]).then(() => undefined),
      onPart: (part, skipped) => {
        progress.compressedBytes += part.size;
        if (skipped) progress.skippedBytes += part.size;
        else progress.uploadedBytes += part.size;
        opts.onProgress?.({ ...progress });
      },
    }).catch((err: unknown) => {
      fail(err);
      throw err;
    }),
  ] as const;
  try {
    const results = await Promise.allSettled(tasks);
    if (signal?.aborted) throw abortError(signal, `export of ${opts.checkpointId}`);
    if (inner.signal.aborted) throw inner.signal.reason;
    for (const r of results) if (r.status === "rejected") throw r.reason;
    const uploaded = results[2].status === "fulfilled" ? results[2].value : undefined;
    if (!uploaded) throw new ReplicationError("SEND_FAILED", "no upload result");
    const counts = zstdCounts((await zstd.exit).stderr);
    if (counts && counts.out !== uploaded.totalBytes) {
      throw new ReplicationError("SEND_FAILED", `zstd wrote ${counts.out} bytes, ${uploaded.totalBytes} were read`);
    }
    return { ...uploaded, uncompressedBytes: counts?.in ?? null };
  } finally {
    killAll();
    reader.close();
    await Promise.all([send.exit, zstd.exit]);
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Drops an unfinished export of `checkpointId`: aborts its multipart upload in the store and
 * deletes its local state. A finished export is not touched (see {@link deleteExport}).
 */
export async function discardExport(opts: {
  store: ObjectStore;
  checkpointId: string;
  stateDir: string;
  signal?: AbortSignal;
}): Promise<void> {
  const checkpointId = assertId(opts.checkpointId, "checkpoint id");
  const stateDir = resolve(opts.stateDir);
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  await withFileLock(join(stateDir, `${checkpointId}.export.lock`), async () => {
    const sp = statePath(stateDir, checkpointId);
    const state = await readState(sp);
    if (state) await opts.store.abortMultipartUpload(state.key, state.uploadId, { signal: opts.signal });
    await rm(sp, { force: true });
  });
}

/**
 * Deletes an exported checkpoint from the store: its manifest first (so that it is never listed
 * without its stream), then its stream. Checkpoints exported incrementally against it can no
 * longer be imported: the caller deletes a chain newest first.
 */
export async function deleteExport(opts: {
  store: ObjectStore;
  checkpointId: string;
  signal?: AbortSignal;
}): Promise<void> {
  const keys = checkpointKeys(opts.checkpointId);
  await opts.store.deleteObject(keys.manifest, { signal: opts.signal });
  await opts.store.deleteObject(keys.stream, { signal: opts.signal });
}
