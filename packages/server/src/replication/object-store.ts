import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { ReplicationError } from "./errors.js";
import { KEY_PREFIX_PATTERN } from "./keys.js";
import { MAX_PARTS } from "./manifest.js";

export interface ObjectInfo {
  key: string;
  size: number;
}

export interface StoreCallOptions {
  signal?: AbortSignal | undefined;
}

/** One part of a multipart upload, as stored. */
export interface StoredPart {
  /** 1-based, as S3 numbers parts. */
  partNumber: number;
  size: number;
  /** sha256 of the part's bytes, lowercase hex. */
  sha256: string;
  /** What the store answered to the part's upload (needed to complete the upload). */
  etag: string;
}

/**
 * The few object-store operations replication needs. Keys are relative to the store's own prefix.
 * Every method rejects with a {@link ReplicationError} (STORE_FAILED, or ABORTED when `signal` fired).
 */
export interface ObjectStore {
  /** Human-readable and secret-free (endpoint, bucket, prefix), for logs and error messages. */
  readonly description: string;
  /** Writes an object in one request (up to 5 GiB on S3), given as one buffer or as its buffers in order. */
  putObject(
    key: string,
    body: Buffer | readonly Buffer[],
    opts?: StoreCallOptions & { contentType?: string },
  ): Promise<void>;
  /** The object's bytes as a stream; `range` selects `length` bytes from `offset`. Rejects NOT_FOUND. */
  getObject(key: string, opts?: StoreCallOptions & { range?: { offset: number; length: number } }): Promise<Readable>;
  /** The object's size, or undefined when there is none. */
  headObject(key: string, opts?: StoreCallOptions): Promise<ObjectInfo | undefined>;
  /** Every object whose key starts with `prefix`. */
  list(prefix: string, opts?: StoreCallOptions): Promise<ObjectInfo[]>;
  /** Deletes the object (no error when there is none). */
  deleteObject(key: string, opts?: StoreCallOptions): Promise<void>;
  createMultipartUpload(key: string, opts?: StoreCallOptions): Promise<string>;
  /**
   * Uploads part `partNumber` (1-based; every part but the last at least 5 MiB on S3), given as one
   * buffer or as the buffers that make it up, in order; resolves to its ETag.
   */
  uploadPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Buffer | readonly Buffer[],
    opts?: StoreCallOptions,
  ): Promise<string>;
  completeMultipartUpload(
    key: string,
    uploadId: string,
    parts: ReadonlyArray<Pick<StoredPart, "partNumber" | "etag">>,
    opts?: StoreCallOptions,
  ): Promise<void>;
  /** Drops an unfinished upload and its parts (no error when it is already gone). */
  abortMultipartUpload(key: string, uploadId: string, opts?: StoreCallOptions): Promise<void>;
}

export interface S3StoreConfig {
  /** e.g. `https://s3.eu-west-1.amazonaws.com`, `https://<account>.r2.cloudflarestorage.com`, `http://127.0.0.1:9000`; AWS's own when omitted. */
  endpoint?: string | undefined;
  region: string;
  bucket: string;
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined };
  /** `bucket` in the path rather than the host name: MinIO, Garage, Ceph and most self-hosted stores need it. */
  forcePathStyle?: boolean | undefined;
  /** Keys are put under it: `[a-z0-9_-]` segments, each followed by `/` (e.g. `ums/`); none by default. */
  keyPrefix?: string | undefined;
  /** Attempts per request (the SDK's retries of throttling and network errors); 3 by default. */
  maxAttempts?: number | undefined;
}

/** Turns an SDK error into ours; never includes the request (its headers carry the signature). */
function storeError(op: string, key: string, err: unknown, signal: AbortSignal | undefined): ReplicationError {
  if (err instanceof ReplicationError) return err;
  const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  if (signal?.aborted || e?.name === "AbortError") {
    return new ReplicationError("ABORTED", `${op} ${key} was cancelled`, { cause: signal?.reason });
  }
  const status = e?.$metadata?.httpStatusCode;
  if (status === 404 || e?.name === "NoSuchKey" || e?.name === "NotFound") {
    return new ReplicationError("NOT_FOUND", `${op} ${key}: no such object`);
  }
  const what = `${e?.name ?? "Error"}${status ? ` (HTTP ${status})` : ""}: ${String(e?.message ?? err).slice(0, 300)}`;
  return Object.assign(new ReplicationError("STORE_FAILED", `${op} ${key} failed: ${what}`), {
    storeErrorName: e?.name,
  });
}

/** A failure worth another attempt: the network, throttling, the store's own (5xx) errors. */
function retryable(raw: unknown, e: ReplicationError): boolean {
  if (e.code !== "STORE_FAILED") return false;
  const status = (raw as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
  return status === undefined || status === 408 || status === 429 || status >= 500;
}

/** An {@link ObjectStore} on the AWS SDK v3: AWS S3, Cloudflare R2, MinIO, Garage, Ceph RGW and the like. */
export class S3ObjectStore implements ObjectStore {
  readonly description: string;
  private readonly client: S3Client;
  /** For part bodies given as chunks (a stream, which the SDK cannot send twice): retried here. */
  private readonly onceClient: S3Client;
  private readonly maxAttempts: number;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(config: S3StoreConfig) {
    const prefix = config.keyPrefix ?? "";
    if (!KEY_PREFIX_PATTERN.test(prefix))
      throw new ReplicationError("INVALID_ID", "keyPrefix must be [a-z0-9_-] segments ending in /");
    if (!config.bucket) throw new ReplicationError("INVALID_ID", "bucket is empty");
    this.bucket = config.bucket;
    this.prefix = prefix;
    this.description = `s3 ${config.endpoint ?? "aws"} bucket ${config.bucket}${prefix ? ` prefix ${prefix}` : ""}`;
    this.maxAttempts = Math.max(1, config.maxAttempts ?? 3);
    const clientConfig = (maxAttempts: number) => ({
      ...(config.endpoint ? { endpoint: config.endpoint } : {}),
      region: config.region,
      credentials: { ...config.credentials },
      forcePathStyle: config.forcePathStyle ?? false,
      maxAttempts,
      // Since SDK 3.729 every upload gets a CRC32 checksum header (and a streaming body is sent
      // with aws-chunked encoding) by default, which many S3-compatible stores reject or
      // mis-store (older MinIO, Garage, Ceph RGW, R2 at the time, and the s3rver test server).
      // Only where an operation requires a checksum is one sent. Integrity does not depend on it:
      // the manifest keeps a sha256 of every part, checked before a byte of it is received.
      requestChecksumCalculation: "WHEN_REQUIRED" as const,
      responseChecksumValidation: "WHEN_REQUIRED" as const,
    });
    this.client = new S3Client(clientConfig(this.maxAttempts));
    this.onceClient = new S3Client(clientConfig(1));
  }

  /** Closes the client's sockets. */
  destroy(): void {
    this.client.destroy();
    this.onceClient.destroy();
  }

  private k(key: string): string {
    return this.prefix + key;
  }

  async putObject(
    key: string,
    body: Buffer | readonly Buffer[],
    opts: StoreCallOptions & { contentType?: string } = {},
  ): Promise<void> {
    await this.sendBody("put", key, body, opts, (client, Body, ContentLength) =>
      client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: this.k(key),
          Body,
          ContentLength,
          ...(opts.contentType ? { ContentType: opts.contentType } : {}),
        }),
        { abortSignal: opts.signal },
      ),
    );
  }

  /**
   * Sends a request with a body. A body given as chunks goes as a stream, which the SDK cannot send
   * twice: it goes through a client without retries, and is retried here with a fresh stream.
   */
  private async sendBody<T>(
    op: string,
    key: string,
    body: Buffer | readonly Buffer[],
    opts: StoreCallOptions,
    send: (client: S3Client, body: Buffer | Readable, length: number) => Promise<T>,
  ): Promise<T> {
    const chunks = Buffer.isBuffer(body) ? undefined : (body as readonly Buffer[]);
    const size = chunks ? chunks.reduce((n, c) => n + c.length, 0) : (body as Buffer).length;
    for (let attempt = 1; ; attempt++) {
      try {
        if (!chunks) return await send(this.client, body as Buffer, size);
        return await send(this.onceClient, Readable.from(chunks, { objectMode: false }), size);
      } catch (err) {
        const e = storeError(op, key, err, opts.signal);
        if (!chunks || attempt >= this.maxAttempts || !retryable(err, e)) throw e;
        await sleep(200 * 2 ** attempt, undefined, { signal: opts.signal }).catch(() => {
          throw storeError(op, key, err, opts.signal);
        });
      }
    }
  }

  async getObject(
    key: string,
    opts: StoreCallOptions & { range?: { offset: number; length: number } } = {},
  ): Promise<Readable> {
    const range = opts.range;
    if (range && (range.length < 1 || range.offset < 0)) throw new RangeError("empty or negative range");
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: this.k(key),
          ...(range ? { Range: `bytes=${range.offset}-${range.offset + range.length - 1}` } : {}),
        }),
        { abortSignal: opts.signal },
      );
      if (!out.Body) throw new ReplicationError("STORE_FAILED", `get ${key}: no body`);
      return out.Body as Readable;
    } catch (err) {
      throw storeError("get", key, err, opts.signal);
    }
  }

  async headObject(key: string, opts: StoreCallOptions = {}): Promise<ObjectInfo | undefined> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.k(key) }), {
        abortSignal: opts.signal,
      });
      return { key, size: out.ContentLength ?? 0 };
    } catch (err) {
      const e = storeError("head", key, err, opts.signal);
      if (e.code === "NOT_FOUND") return undefined;
      throw e;
    }
  }

  async list(prefix: string, opts: StoreCallOptions = {}): Promise<ObjectInfo[]> {
    const out: ObjectInfo[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.k(prefix),
            ...(token ? { ContinuationToken: token } : {}),
          }),
          { abortSignal: opts.signal },
        );
        for (const o of page.Contents ?? []) {
          if (o.Key?.startsWith(this.prefix)) out.push({ key: o.Key.slice(this.prefix.length), size: o.Size ?? 0 });
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (err) {
      throw storeError("list", prefix, err, opts.signal);
    }
    return out;
  }

  async deleteObject(key: string, opts: StoreCallOptions = {}): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.k(key) }), {
        abortSignal: opts.signal,
      });
    } catch (err) {
      const e = storeError("delete", key, err, opts.signal);
      if (e.code !== "NOT_FOUND") throw e;
    }
  }

  async createMultipartUpload(key: string, opts: StoreCallOptions = {}): Promise<string> {
    try {
      const out = await this.client.send(
        new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: this.k(key), ContentType: "application/zstd" }),
        { abortSignal: opts.signal },
      );
      if (!out.UploadId) throw new ReplicationError("STORE_FAILED", `create upload ${key}: no upload id`);
      return out.UploadId;
    } catch (err) {
      throw storeError("create upload", key, err, opts.signal);
    }
  }

  async uploadPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Buffer | readonly Buffer[],
    opts: StoreCallOptions = {},
  ): Promise<string> {
    const op = `upload part ${partNumber} of`;
    const out = await this.sendBody(op, key, body, opts, (client, Body, ContentLength) =>
      client.send(
        new UploadPartCommand({
          Bucket: this.bucket,
          Key: this.k(key),
          UploadId: uploadId,
          PartNumber: partNumber,
          Body,
          ContentLength,
        }),
        { abortSignal: opts.signal },
      ),
    );
    if (!out.ETag) throw new ReplicationError("STORE_FAILED", `${op} ${key}: no ETag`);
    return out.ETag;
  }

  async completeMultipartUpload(
    key: string,
    uploadId: string,
    parts: ReadonlyArray<Pick<StoredPart, "partNumber" | "etag">>,
    opts: StoreCallOptions = {},
  ): Promise<void> {
    try {
      await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: this.k(key),
          UploadId: uploadId,
          MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag })) },
        }),
        { abortSignal: opts.signal },
      );
    } catch (err) {
      throw storeError("complete upload", key, err, opts.signal);
    }
  }

  async abortMultipartUpload(key: string, uploadId: string, opts: StoreCallOptions = {}): Promise<void> {
    try {
      await this.client.send(
        new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.k(key), UploadId: uploadId }),
        {
          abortSignal: opts.signal,
        },
      );
    } catch (err) {
      const e = storeError("abort upload", key, err, opts.signal);
      if (e.code !== "NOT_FOUND") throw e;
    }
  }
}

/** True when the store says the multipart upload is gone (expired, aborted, or completed already). */
export function isUploadGone(err: unknown): boolean {
  const name = (err as { storeErrorName?: string })?.storeErrorName;
  return (
    err instanceof ReplicationError && (err.code === "NOT_FOUND" || name === "NoSuchUpload" || name === "InvalidPart")
  );
}

/** Reads a whole (small) object, refusing one larger than `maxBytes`. */
export async function readObject(
  store: ObjectStore,
  key: string,
  maxBytes: number,
  opts: StoreCallOptions = {},
): Promise<Buffer> {
  const body = await store.getObject(key, opts);
  return readAtMost(body, maxBytes, `${key} is larger than ${maxBytes} bytes`, "TRUNCATED");
}

/** Collects a stream into one buffer; more than `max` bytes destroys it and rejects with `code`. */
export async function readAtMost(
  body: Readable,
  max: number,
  tooLarge: string,
  code: "TRUNCATED" | "INVALID_MANIFEST",
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  try {
    for await (const chunk of body) {
      const b = chunk as Buffer;
      n += b.length;
      if (n > max) throw new ReplicationError(code, tooLarge);
      chunks.push(b);
    }
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks, n);
}

export interface UploadPartsOptions extends StoreCallOptions {
  partSize: number;
  /** Parts uploaded at once (each holds a part-size buffer); 2 by default. */
  concurrency?: number;
  /**
   * Parts already stored by an earlier, interrupted run of the same upload. A part of the stream
   * whose number, size and sha256 match is not uploaded again; one that differs rejects with
   * {@link StreamChangedError} (the stream is not the one that was being uploaded).
   */
  stored?: readonly StoredPart[];
  /** Called when a part is stored (to persist upload state); awaited before the part counts as done. */
  onStored?: (part: StoredPart) => Promise<void>;
  /**
   * A stream that fits in one part is stored with one PutObject, without a multipart upload (the
   * upload id is then never asked for); `parts` has its one part, `single` is set.
   */
  singlePut?: boolean;
  /** Awaited before the last part is cut (when the source has ended): a rejection stops the upload. */
  beforeFinalPart?: () => Promise<void>;
  /** Called for each part of the stream, uploaded or skipped. */
  onPart?: (part: StoredPart, skipped: boolean) => void;
  /**
   * Called with a part's chunks (as the source gave them, or views of them) once nothing reads
   * them any more: the part is stored, found stored, or its upload failed. A source that reuses its
   * buffers (a {@link import("./slab-reader.js").SlabReader}) gets them back through it.
   */
  release?: (chunks: readonly Buffer[]) => void;
}

export interface UploadPartsResult {
  /** Every part of the stream, in order. */
  parts: StoredPart[];
  totalBytes: number;
  uploadedBytes: number;
  skippedBytes: number;
  /** Stored with one PutObject (see {@link UploadPartsOptions.singlePut}): there is no upload to complete. */
  single?: boolean;
}

/** The regenerated stream is not the one an interrupted upload had begun storing. */
export class StreamChangedError extends Error {
  constructor(partNumber: number) {
    super(`part ${partNumber} differs from the part stored by the interrupted upload`);
    this.name = "StreamChangedError";
  }
}

/**
 * Uploads `source` as the parts of multipart upload `uploadId` (cut at `partSize` bytes; a function
 * is called once, when the first part is ready, to create the upload), with up to
 * `concurrency` parts in flight, skipping those already stored (see {@link UploadPartsOptions.stored}).
 * Does not complete the upload: the caller does, once it knows the stream ended well.
 */
export async function uploadParts(
  store: ObjectStore,
  key: string,
  upload: string | (() => Promise<string>),
  source: AsyncIterable<Buffer>,
  opts: UploadPartsOptions,
): Promise<UploadPartsResult> {
  let uploadId: Promise<string> | undefined;
  const getUploadId = () => {
    uploadId ??= typeof upload === "string" ? Promise.resolve(upload) : upload();
    return uploadId;
  };
  const { partSize } = opts;
  const concurrency = Math.max(1, opts.concurrency ?? 2);
  const stored = new Map((opts.stored ?? []).map((p) => [p.partNumber, p]));
  const parts: StoredPart[] = [];
  const result: UploadPartsResult = { parts, totalBytes: 0, uploadedBytes: 0, skippedBytes: 0 };
  // In-flight uploads never reject (their error is kept in `failure`), so none can go unhandled
  // while this function is waiting on the source; a failure stops the others through `inner`.
  const inner = new AbortController();
  const stop = () => inner.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", stop, { once: true });
  const inflight = new Set<Promise<void>>();
  let failure: unknown;
  const check = () => {
    if (failure !== undefined) throw failure;
    if (opts.signal?.aborted) throw new ReplicationError("ABORTED", `upload of ${key} was cancelled`);
  };

  // A part is kept as the stream's own chunks (views where a chunk straddles two parts) and hashed
  // as they come: no part-size buffer is filled. Fresh memory costs a page fault per 4 KiB on its
  // first touch, which made a new 32 MiB buffer per part the slowest step (~130 MiB/s on a VM).
  const emit = async (chunks: Buffer[], size: number, sha256: string) => {
    const partNumber = parts.length + 1;
    if (partNumber > MAX_PARTS) {
      throw new ReplicationError("TOO_LARGE", `${key} needs more than ${MAX_PARTS} parts of ${partSize} bytes`);
    }
    result.totalBytes += size;
    const before = stored.get(partNumber);
    if (before) {
      if (before.size !== size || before.sha256 !== sha256) throw new StreamChangedError(partNumber);
      opts.release?.(chunks);
      parts.push(before);
      result.skippedBytes += size;
      opts.onPart?.(before, true);
      return;
    }
    const part: StoredPart = { partNumber, size, sha256, etag: "" };
    parts.push(part);
    const task = (async () => {
      part.etag = await store.uploadPart(key, await getUploadId(), partNumber, chunks, { signal: inner.signal });
      await opts.onStored?.(part);
      result.uploadedBytes += part.size;
      opts.onPart?.(part, false);
    })().catch((err: unknown) => {
      failure ??= err;
      inner.abort(err);
    });
    const tracked: Promise<void> = task.finally(() => {
      opts.release?.(chunks);
      inflight.delete(tracked);
    });
    inflight.add(tracked);
    while (inflight.size >= concurrency) await Promise.race(inflight);
    check();
  };

  try {
    let chunks: Buffer[] = [];
    let fill = 0;
    let hash = createHash("sha256");
    for await (const chunk of source) {
      check();
      let off = 0;
      while (off < chunk.length) {
        const n = Math.min(partSize - fill, chunk.length - off);
        const piece = off === 0 && n === chunk.length ? chunk : chunk.subarray(off, off + n);
        chunks.push(piece);
        hash.update(piece);
        fill += n;
        off += n;
        if (fill === partSize) {
          await emit(chunks, fill, hash.digest("hex"));
          chunks = [];
          fill = 0;
          hash = createHash("sha256");
        }
      }
    }
    await opts.beforeFinalPart?.();
    check();
    if (fill > 0 && parts.length === 0 && stored.size === 0 && opts.singlePut) {
      const sha256 = hash.digest("hex");
      await store.putObject(key, chunks, { signal: inner.signal }).finally(() => opts.release?.(chunks));
      const part: StoredPart = { partNumber: 1, size: fill, sha256, etag: "" };
      parts.push(part);
      Object.assign(result, { totalBytes: fill, uploadedBytes: fill, single: true });
      opts.onPart?.(part, false);
    } else if (fill > 0) await emit(chunks, fill, hash.digest("hex"));
    // A stream shorter than what the interrupted run had stored is another stream.
    for (const n of stored.keys()) if (n > parts.length) throw new StreamChangedError(n);
  } catch (err) {
    failure ??= err;
    inner.abort(err);
  } finally {
    await Promise.all(inflight);
    opts.signal?.removeEventListener("abort", stop);
  }
  check();
  return result;
}

/**
 * Puts a stream as one object through a multipart upload in parts of `partSize` bytes (at least
 * 5 MiB on S3, except the last); the upload is aborted if anything fails.
 */
export async function putStream(
  store: ObjectStore,
  key: string,
  source: AsyncIterable<Buffer>,
  opts: { partSize: number; concurrency?: number; signal?: AbortSignal },
): Promise<UploadPartsResult> {
  const uploadId = await store.createMultipartUpload(key, { signal: opts.signal });
  try {
    const result = await uploadParts(store, key, uploadId, source, opts);
    await store.completeMultipartUpload(key, uploadId, result.parts, { signal: opts.signal });
    return result;
  } catch (err) {
    await store.abortMultipartUpload(key, uploadId).catch(() => {}); // best effort: the error is what matters
    throw err;
  }
}

/** sha256 of a buffer, lowercase hex. */
export function sha256Hex(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}
