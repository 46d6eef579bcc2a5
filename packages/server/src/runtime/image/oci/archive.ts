import { createHash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { copyFile, type FileHandle, link, lstat, mkdir, open, readdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { ImageArchiveError, quote } from "./errors.js";
import { MAX_SYMLINKS } from "./scoped-path.js";
import {
  destroyInput,
  type EntrySink,
  readTar,
  sniffCompression,
  type TarHeader,
  tarFormatProblem,
  unsupportedCompression,
} from "./tar-input.js";
import { TarEvent, TarFormatError, TarParser } from "./tar-parser.js";

/** What a unit takes from the image's config. */
export interface OciImageConfig {
  /** `KEY=value` strings (config.Env). */
  env: string[];
  /** config.WorkingDir; null when unset or empty. */
  workingDir: string | null;
  /** config.User (`name`, `uid`, `uid:gid`, ...); null when unset or empty. */
  user: string | null;
}

export interface OciLayerRef {
  /** The layer's file, in the work directory. */
  path: string;
  /** Told by the file's first bytes (not by its name or media type). */
  compression: "none" | "gzip";
  /** Digest of the file as stored (`sha256:<hex>`). */
  digest?: string;
  /** Digest of the uncompressed tar, from the image config (rootfs.diff_ids), when it has it. */
  diffId?: string;
  /** Size of the file in bytes. */
  size: number;
}

export interface OciArchive {
  format: "docker-save" | "oci-layout";
  config: OciImageConfig;
  /** In order: the first is applied first. */
  layers: OciLayerRef[];
  /** The image's name as the archive gives it (RepoTags[0], the ref.name annotation), or null. */
  reference: string | null;
  /** `os/architecture[/variant]` from the image config, or null. */
  platform: string | null;
}

/** JSON files (manifests, configs, index) larger than this are refused: a real one is a few KiB. */
export const MAX_JSON_BYTES = 16 * 1024 * 1024;
/** The archive is read in chunks of this size, and its files written in writes of about this size. */
const READ_CHUNK = 1024 * 1024;
const WRITE_BATCH = 1024 * 1024;
/** Nested image indexes followed at most. */
const MAX_INDEX_DEPTH = 4;

type Algorithm = "sha256" | "sha512";

interface StoredFile {
  size: number;
  /** Where its data is: its file in the work directory, or its place in the archive's file. */
  at: FileAt;
  /** sha512 for files under blobs/sha512/, else sha256. */
  algorithm: Algorithm;
  /** `<algorithm>:<hex>`, once known: hashed as the archive was read, or later ({@link Digests}). */
  digest?: string;
  /** The digest being computed, when it is. */
  hashing?: Promise<string>;
}

/** Where a file's data is: `size` bytes at `offset` in the file `path`. */
export interface FileAt {
  path: string;
  offset: number;
}

/** A layer as {@link readArchive} gives it: where its data is, too. */
export type LayerAt = OciLayerRef & { offset: number };

/** An archive as {@link readArchive} gives it. */
export type ArchiveAt = Omit<OciArchive, "layers"> & {
  layers: LayerAt[];
  /**
   * Resolves when every digest check left for later passed; else rejects with the error of the
   * first that failed (what reading the archive would have said had it hashed everything first).
   */
  verify(): Promise<void>;
};

type Link = { kind: "symlink" | "hardlink"; target: string | undefined };

const BLOB_NAME = /^blobs\/(sha256|sha512)\/([0-9a-f]+)$/;
const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;
/** Read in place, a file larger than this is hashed later, while the layers are applied. */
const HASH_LATER = 1024 * 1024;
/** Read in place, the archive's headers are read in chunks of this size (large files are skipped). */
const INDEX_CHUNK = 64 * 1024;

/** Components of a path inside the archive ("./" and "//" dropped); undefined when it would leave it. */
function archiveComponents(path: string): string[] | undefined {
  const parts = path.split("/").filter((p) => p !== "" && p !== ".");
  return parts.includes("..") ? undefined : parts;
}

/** `target` of a symlink at `rel`, as a path inside the archive; undefined when it points outside it. */
function symlinkTarget(rel: string, target: string): string | undefined {
  if (target.startsWith("/")) return undefined;
  const out = rel.split("/").slice(0, -1);
  for (const p of target.split("/")) {
    if (p === "" || p === ".") continue;
    if (p === "..") {
      if (out.pop() === undefined) return undefined;
    } else out.push(p);
  }
  return out.length > 0 ? out.join("/") : undefined;
}

function errnoCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** Up to `size` bytes at `at` (fewer at the file's end). */
async function readAt(at: FileAt, size: number): Promise<Buffer> {
  const buf = Buffer.alloc(size);
  const fh = await open(at.path, "r");
  let n = 0;
  try {
    while (n < size) {
      const { bytesRead } = await fh.read(buf, n, size - n, at.offset + n);
      if (bytesRead === 0) break;
      n += bytesRead;
    }
  } finally {
    await fh.close();
  }
  return buf.subarray(0, n);
}

/**
 * Digests of files read in place, computed one after the other in the background (in this thread,
 * in chunks: while the layers are applied by another), and the checks that wait for them. A check
 * is a promise of the error it found (undefined: none); {@link Digests.firstFailure} gives the
 * error of the first check made that failed, so that an archive with several problems is reported
 * as if it had been hashed entirely, first.
 */
class Digests {
  private readonly checks: Promise<unknown>[] = [];
  private queue: Promise<unknown> = Promise.resolve();
  private buffer: Buffer | undefined;

  constructor(private readonly signal: AbortSignal | undefined) {}

  /** The digest of `file` (`<algorithm>:<hex>`). */
  digestOf(file: StoredFile): Promise<string> {
    if (file.digest !== undefined) return Promise.resolve(file.digest);
    file.hashing ??= this.queue.then(async () => {
      const digest = await this.hash(file);
      file.digest = digest;
      return digest;
    });
    this.queue = file.hashing.catch(() => {});
    return file.hashing;
  }

  /** Checks, later, that `file`'s digest is `expected`; `problem` is the error when it is not. */
  expect(file: StoredFile, expected: string, problem: (digest: string) => Error): void {
    this.checks.push(
      this.digestOf(file).then(
        (digest) => (digest === expected ? undefined : problem(digest)),
        (err: unknown) => err,
      ),
    );
  }

  /** The error of the first check that failed, once all are done; undefined if none did. */
  async firstFailure(): Promise<unknown> {
    for (let i = 0; i < this.checks.length; i++) {
      const err = await this.checks[i];
      if (err !== undefined) return err;
    }
    return undefined;
  }

  private async hash(file: StoredFile): Promise<string> {
    const hash = createHash(file.algorithm);
    this.buffer ??= Buffer.allocUnsafe(READ_CHUNK); // the same memory for every chunk: fresh memory costs more
    const buf = this.buffer;
    const fh = await open(file.at.path, "r");
    try {
      for (let done = 0; done < file.size; ) {
        this.signal?.throwIfAborted();
        const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, file.size - done), file.at.offset + done);
        if (bytesRead === 0) throw new Error(`${file.at.path} ended before its data at ${file.at.offset}`);
        hash.update(buf.subarray(0, bytesRead));
        done += bytesRead;
      }
    } finally {
      await fh.close();
    }
    return `${file.algorithm}:${hash.digest("hex")}`;
  }
}

function blobMismatch(blob: RegExpExecArray): (digest: string) => ImageArchiveError {
  return (digest) =>
    new ImageArchiveError(
      `blob ${blob[1]}:${blob[2]} does not match its digest (its content is ${digest}): the archive is corrupt`,
    );
}

/** What an entry's data is for: a sink, or nothing to read (`skip`: it is read later, in place). */
type FileSink = EntrySink & { skip?: boolean };

/**
 * The files of the outer archive, as its entries come ({@link ArchiveFiles.entry}), then its links
 * ({@link ArchiveFiles.linkFiles}): regular files and directories only. Symlinks and hard links between
 * its files (docker save links duplicate layers) become hard links of the files (or copies): no
 * symlink is ever made. Every file is hashed; a blob (`blobs/<alg>/<hex>`) whose content does not
 * match its name is an error.
 *
 * With `inPlace` (the path of the archive, an uncompressed tar), the files' data is not written:
 * each file of the work directory stays empty, a stand-in that has the same conflicts with other
 * entries, and the data is read from the archive where it is. Files larger than {@link HASH_LATER}
 * are not read at all then: they are hashed later ({@link Digests}).
 */
class ArchiveFiles {
  readonly files = new Map<string, StoredFile>();
  private readonly links = new Map<string, Link>();
  /** Data of files being copied is gathered here, then written. */
  private batch: Buffer | undefined;

  constructor(
    private readonly workDir: string,
    private readonly inPlace: string | undefined,
    private readonly digests: Digests,
  ) {}

  private conflict(name: string, err: unknown): ImageArchiveError {
    return new ImageArchiveError(`archive entry ${quote(name)} conflicts with another entry (${errnoCode(err)})`);
  }

  private async makeDir(name: string, rel: string): Promise<void> {
    try {
      await mkdir(join(this.workDir, rel), { recursive: true });
    } catch (err) {
      if (["EEXIST", "ENOTDIR"].includes(errnoCode(err) ?? "")) throw this.conflict(name, err);
      throw err;
    }
  }

  private async clear(name: string, rel: string): Promise<void> {
    const path = join(this.workDir, rel);
    const st = await lstat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err.code === "ENOTDIR" ? this.conflict(name, err) : err;
    });
    if (st?.isDirectory()) throw new ImageArchiveError(`archive entry ${quote(name)} is also a directory`);
    if (st) await unlink(path);
    this.files.delete(rel);
    this.links.delete(rel);
  }

  readonly entry = async (header: TarHeader): Promise<FileSink | undefined> => {
    const name = header.name;
    if (name.startsWith("/")) throw new ImageArchiveError(`archive entry ${quote(name)} is not a relative path`);
    if (name.includes("\0")) throw new ImageArchiveError(`archive entry ${quote(name)} has a NUL byte in its name`);
    const parts = archiveComponents(name);
    if (parts === undefined) throw new ImageArchiveError(`archive entry ${quote(name)} leaves the archive ('..')`);
    if (parts.length === 0) return; // "./": the archive's top directory
    const rel = parts.join("/");
    switch (header.type) {
      case "directory":
        await this.makeDir(name, rel);
        return;
      case "file":
      case "contiguous-file": {
        if (parts.length > 1) await this.makeDir(name, parts.slice(0, -1).join("/"));
        await this.clear(name, rel);
        const fh = await open(
          join(this.workDir, rel),
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          0o600,
        ).catch((err: unknown) => {
          throw ["EEXIST", "ENOTDIR", "EISDIR"].includes(errnoCode(err) ?? "") ? this.conflict(name, err) : err;
        });
        if (this.inPlace === undefined) return this.copy(rel, fh);
        await fh.close(); // a stand-in
        return this.inPlaceFile(header, rel, this.inPlace);
      }
      case "symlink":
      case "link": {
        await this.clear(name, rel);
        const linkname = header.linkname ?? "";
        let target: string | undefined;
        if (header.type === "symlink") target = symlinkTarget(rel, linkname);
        else if (!linkname.startsWith("/")) target = archiveComponents(linkname)?.join("/") || undefined;
        this.links.set(rel, { kind: header.type === "symlink" ? "symlink" : "hardlink", target });
        return;
      }
      default:
        return; // devices, FIFOs: nothing an image archive needs
    }
  };

  /** The data of the file `rel` written to its file of the work directory, `fh`, and hashed. */
  private copy(rel: string, fh: FileHandle): FileSink {
    const blob = BLOB_NAME.exec(rel);
    const algorithm: Algorithm = blob?.[1] === "sha512" ? "sha512" : "sha256";
    const hash = createHash(algorithm);
    let size = 0;
    // Written in batches of about WRITE_BATCH bytes (gathered in `batch`: the input's chunks are
    // not to be kept), fewer and larger writes.
    this.batch ??= Buffer.allocUnsafe(WRITE_BATCH);
    const batch = this.batch;
    let pending = 0;
    const flush = async () => {
      for (let off = 0; off < pending; ) off += (await fh.write(batch, off, pending - off)).bytesWritten;
      pending = 0;
    };
    return {
      data: async (chunk) => {
        hash.update(chunk);
        size += chunk.length;
        for (let off = 0; off < chunk.length; ) {
          const n = chunk.copy(batch, pending, off);
          pending += n;
          off += n;
          if (pending === batch.length) await flush();
        }
      },
      end: async () => {
        try {
          if (pending > 0) await flush();
        } finally {
          await fh.close();
        }
        const digest = `${algorithm}:${hash.digest("hex")}`;
        if (blob && digest !== `${blob[1]}:${blob[2]}`) throw blobMismatch(blob)(digest);
        this.files.set(rel, { digest, size, at: { path: join(this.workDir, rel), offset: 0 }, algorithm });
      },
      abort: () => {
        fh.close().catch(() => {});
      },
    };
  }

  /** The file `rel`, where it is in the archive `archive`: hashed now (a small one) or later. */
  private inPlaceFile(header: TarHeader, rel: string, archive: string): FileSink {
    const blob = BLOB_NAME.exec(rel);
    const algorithm: Algorithm = blob?.[1] === "sha512" ? "sha512" : "sha256";
    const file: StoredFile = { size: header.size, at: { path: archive, offset: header.byteOffset ?? 0 }, algorithm };
    if (header.size > HASH_LATER) {
      return {
        skip: true,
        end: () => {
          if (blob) this.digests.expect(file, `${blob[1]}:${blob[2]}`, blobMismatch(blob));
          this.files.set(rel, file);
        },
      };
    }
    const hash = createHash(algorithm);
    return {
      data: (chunk) => {
        hash.update(chunk);
      },
      end: () => {
        file.digest = `${algorithm}:${hash.digest("hex")}`;
        if (blob && file.digest !== `${blob[1]}:${blob[2]}`) throw blobMismatch(blob)(file.digest);
        this.files.set(rel, file);
      },
    };
  }

  /** Links, once every file is there: each becomes a hard link to (or a copy of) the file it names. */
  async linkFiles(): Promise<void> {
    const { files, links, workDir } = this;
    for (const [rel, l] of links) {
      let target = l.target;
      for (let n = 0; target !== undefined && links.has(target) && n <= MAX_SYMLINKS; n++)
        target = links.get(target)?.target;
      const file = target === undefined ? undefined : files.get(target);
      if (target === undefined || file === undefined) continue; // dangling, a directory or outside: not needed
      const parts = rel.split("/");
      if (parts.length > 1) await this.makeDir(rel, parts.slice(0, -1).join("/"));
      const from = join(workDir, target);
      const to = join(workDir, rel);
      await link(from, to).catch(async (err: unknown) => {
        if (errnoCode(err) === "EEXIST" || errnoCode(err) === "ENOTDIR") throw this.conflict(rel, err);
        await copyFile(from, to, constants.COPYFILE_EXCL);
      });
      files.set(rel, file);
    }
  }
}

/**
 * Reads the entries of the uncompressed tar archive at `path` for `files`, reading only their
 * headers and the data they ask for: the data of a file whose sink says `skip` is gone past.
 */
async function readHeaders(path: string, files: ArchiveFiles, signal: AbortSignal | undefined): Promise<void> {
  const fh = await open(path, "r");
  let sink: FileSink | undefined;
  let inEntry = false;
  try {
    const { size: fileSize } = await fh.stat();
    const parser = new TarParser();
    const buf = Buffer.allocUnsafe(INDEX_CHUNK); // used again for each chunk (see TarParser)
    let pos = 0;
    let skipping = false;
    for (;;) {
      const ev = parser.next();
      if (ev === TarEvent.Need) {
        if (skipping) {
          pos += parser.skipData();
          skipping = false;
          continue;
        }
        if (pos > fileSize) throw new TarFormatError("Unexpected end of data"); // it ends in what was skipped
        const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
        if (bytesRead === 0) {
          parser.end();
          return;
        }
        pos += bytesRead;
        parser.push(buf.subarray(0, bytesRead));
      } else if (ev === TarEvent.Entry) {
        signal?.throwIfAborted();
        inEntry = true;
        sink = undefined;
        sink = await files.entry(parser.header);
        skipping = sink?.skip === true;
      } else if (ev === TarEvent.Data) {
        signal?.throwIfAborted();
        if (!skipping) await sink?.data?.(parser.chunk);
      } else {
        const s = sink;
        sink = undefined;
        inEntry = false;
        skipping = false;
        await s?.end?.();
      }
    }
  } catch (err) {
    if (inEntry) sink?.abort?.();
    throw err instanceof TarFormatError ? tarFormatProblem("the archive", err) : err;
  } finally {
    await fh.close();
  }
}

/**
 * Reads an image archive made by `docker save` (legacy or 25+) or an OCI image layout in a tar (plain
 * or gzip): extracts its files into `workDir` (an empty directory the caller owns and removes
 * afterwards) and reads its manifest and image config. Of an archive with several images the first
 * is taken; of a multi-platform index, the host's architecture (or the only image). Blobs are checked
 * against their digests. Problems of the archive are an {@link ImageArchiveError}.
 */
export async function readOciArchive(
  archive: string | NodeJS.ReadableStream,
  workDir: string,
  opts: { signal?: AbortSignal } = {},
): Promise<OciArchive> {
  const { verify, ...read } = await readArchive(archive, workDir, { ...opts, inPlace: false });
  await verify(); // nothing is left for later when files are copied
  return { ...read, layers: read.layers.map(({ offset: _, ...layer }) => layer) };
}

/**
 * {@link readOciArchive}, and where each layer's data is. With `inPlace`, when `archive` is the path
 * of an uncompressed tar, its files are not copied: the layers are read from the archive itself,
 * `size` bytes at `offset` of `path` (the work directory holds empty stand-ins), and large files are
 * hashed in the background: {@link ArchiveAt.verify} says when they all matched.
 */
export async function readArchive(
  archive: string | NodeJS.ReadableStream,
  workDir: string,
  opts: { signal?: AbortSignal; inPlace: boolean },
): Promise<ArchiveAt> {
  let inPlace: string | undefined;
  try {
    const wd = await lstat(workDir);
    if (!wd.isDirectory()) throw new Error(`${workDir} is not a directory`);
    if ((await readdir(workDir)).length > 0) throw new Error(`${workDir} is not empty`);
    if (opts.inPlace && typeof archive === "string") {
      const head = await readAt({ path: archive, offset: 0 }, 6);
      if (sniffCompression(head) === "none") inPlace = archive;
    }
  } catch (err) {
    destroyInput(archive);
    throw err;
  }
  const digests = new Digests(opts.signal);
  const verify = async () => {
    const err = await digests.firstFailure();
    if (err !== undefined) throw err;
  };
  try {
    const files = new ArchiveFiles(workDir, inPlace, digests);
    if (inPlace !== undefined) {
      await readHeaders(inPlace, files, opts.signal);
    } else {
      const input = typeof archive === "string" ? createReadStream(archive, { highWaterMark: READ_CHUNK }) : archive;
      await readTar(input as AsyncIterable<Buffer>, {
        what: "the archive",
        onEntry: files.entry,
        checkAbort: () => opts.signal?.throwIfAborted(),
        hash: false,
      });
    }
    await files.linkFiles();
    const reader = new ArchiveReader(files.files, digests);
    let read: Omit<ArchiveAt, "verify">;
    if (files.files.has("manifest.json")) read = await reader.dockerSave();
    else if (files.files.has("index.json")) read = await reader.ociLayout();
    else {
      throw new ImageArchiveError(
        "archive has no manifest.json or index.json: not a docker save or OCI layout archive (make it with `docker save IMAGE -o FILE.tar`)",
      );
    }
    return { ...read, verify };
  } catch (err) {
    // A digest that does not match, of a file before what failed, is the archive's first problem.
    throw (await digests.firstFailure()) ?? err;
  }
}

type Json = unknown;

function isObject(v: Json): v is Record<string, Json> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function hostArchitecture(): string {
  const arch: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "arm", ia32: "386", ppc64: "ppc64le" };
  return arch[process.arch] ?? process.arch;
}

const INDEX_TYPES = new Set([
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
]);
const MANIFEST_TYPES = new Set([
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json",
]);

/**
 * Reads the manifest and config of the archive's files. A check of a file's digest that is not
 * known yet (a large file read in place) is left to `digests`; its error, if any, is the archive's
 * first problem ({@link readArchive}).
 */
class ArchiveReader {
  constructor(
    private readonly files: Map<string, StoredFile>,
    private readonly digests: Digests,
  ) {}

  private async json(rel: string, what: string): Promise<Json> {
    const file = this.files.get(rel);
    if (file === undefined) throw new ImageArchiveError(`the archive has no ${what} (${rel})`);
    if (file.size > MAX_JSON_BYTES) throw new ImageArchiveError(`${what} (${rel}) is too large: ${file.size} bytes`);
    const text = (await readAt(file.at, file.size)).toString("utf8");
    try {
      return JSON.parse(text) as Json;
    } catch (err) {
      throw new ImageArchiveError(`${what} (${rel}) is not valid JSON: ${(err as Error).message}`);
    }
  }

  /**
   * The file of the blob `digest`, checked against it: now, or (`later`, a layer) when its digest is
   * known.
   */
  private async blob(digest: Json, what: string, later = false): Promise<string> {
    if (typeof digest !== "string" || !DIGEST.test(digest)) {
      throw new ImageArchiveError(`${what} has an invalid digest ${quote(String(digest))}`);
    }
    const [alg, hex] = digest.split(":") as [string, string];
    const rel = `blobs/${alg}/${hex}`;
    const file = this.files.get(rel);
    if (file === undefined) throw new ImageArchiveError(`the archive has no blob ${digest} (${what})`);
    const problem = () =>
      new ImageArchiveError(`blob ${digest} (${what}) does not match its digest: the archive is corrupt`);
    if (later && file.digest === undefined) this.digests.expect(file, digest, problem);
    else if ((await this.digests.digestOf(file)) !== digest) throw problem();
    return rel;
  }

  /** A path named by manifest.json, as a file of the archive. */
  private member(path: Json, what: string): string {
    const parts = typeof path === "string" && !path.startsWith("/") ? archiveComponents(path) : undefined;
    if (parts === undefined || parts.length === 0) {
      throw new ImageArchiveError(
        `manifest.json names ${what} ${quote(String(path))}, which is not a path in the archive`,
      );
    }
    const rel = parts.join("/");
    if (!this.files.has(rel))
      throw new ImageArchiveError(`manifest.json names ${what} ${rel}, which is not in the archive`);
    return rel;
  }

  private async layer(rel: string, index: number, diffId: string | undefined): Promise<LayerAt> {
    const file = this.files.get(rel) as StoredFile;
    const head = await readAt(file.at, Math.min(6, file.size));
    const compression = sniffCompression(head);
    if (compression !== "none" && compression !== "gzip")
      throw unsupportedCompression(`layer ${index + 1}`, compression);
    if (compression === "none" && diffId !== undefined) {
      const problem = () =>
        new ImageArchiveError(
          `layer ${index + 1} (${rel}) does not match its diff_id in the image config (${diffId}): the archive is corrupt`,
        );
      if (file.digest === undefined) this.digests.expect(file, diffId, problem);
      else if (file.digest !== diffId) throw problem();
    }
    return {
      path: file.at.path,
      offset: file.at.offset,
      compression,
      digest: file.digest,
      ...(diffId ? { diffId } : {}),
      size: file.size,
    };
  }

  private async layers(rels: string[], config: Json): Promise<LayerAt[]> {
    const rootfs = isObject(config) ? config.rootfs : undefined;
    const diffIds = isObject(rootfs) && Array.isArray(rootfs.diff_ids) ? rootfs.diff_ids : undefined;
    if (diffIds !== undefined && diffIds.length !== rels.length) {
      throw new ImageArchiveError(
        `the image config lists ${diffIds.length} layers (rootfs.diff_ids), its manifest ${rels.length}: the archive is corrupt`,
      );
    }
    const out: LayerAt[] = [];
    for (const [i, rel] of rels.entries()) {
      const d = diffIds?.[i];
      out.push(await this.layer(rel, i, typeof d === "string" && DIGEST.test(d) ? d : undefined));
    }
    return out;
  }

  private imageConfig(raw: Json): { config: OciImageConfig; platform: string | null } {
    if (!isObject(raw)) throw new ImageArchiveError("the image config is not a JSON object");
    if (typeof raw.os === "string" && raw.os !== "linux") {
      throw new ImageArchiveError(`the image is for ${raw.os}: units run Linux images`);
    }
    const c = isObject(raw.config) ? raw.config : {};
    const text = (v: Json) => (typeof v === "string" && v !== "" ? v : null);
    const platform =
      typeof raw.os === "string" && typeof raw.architecture === "string"
        ? [raw.os, raw.architecture, ...(typeof raw.variant === "string" ? [raw.variant] : [])].join("/")
        : null;
    return {
      config: {
        env: Array.isArray(c.Env) ? c.Env.filter((e): e is string => typeof e === "string") : [],
        workingDir: text(c.WorkingDir),
        user: text(c.User),
      },
      platform,
    };
  }

  async dockerSave(): Promise<Omit<ArchiveAt, "verify">> {
    const manifest = await this.json("manifest.json", "manifest");
    if (!Array.isArray(manifest) || manifest.length === 0) {
      throw new ImageArchiveError("manifest.json lists no image: not a docker save archive");
    }
    const m = manifest[0] as Json;
    if (!isObject(m) || !Array.isArray(m.Layers)) {
      throw new ImageArchiveError("manifest.json is not a docker save manifest (no Config and Layers)");
    }
    const configRel = this.member(m.Config, "the image config");
    const legacyName = /^([0-9a-f]{64})\.json$/.exec(configRel);
    const configFile = this.files.get(configRel) as StoredFile;
    if (legacyName && (await this.digests.digestOf(configFile)) !== `sha256:${legacyName[1]}`) {
      throw new ImageArchiveError(`the image config ${configRel} does not match its digest: the archive is corrupt`);
    }
    const raw = await this.json(configRel, "image config");
    const { config, platform } = this.imageConfig(raw);
    const layerRels = m.Layers.map((l: Json, i: number) => this.member(l, `layer ${i + 1}`));
    const tags = Array.isArray(m.RepoTags) ? m.RepoTags.filter((t): t is string => typeof t === "string") : [];
    return {
      format: "docker-save",
      config,
      layers: await this.layers(layerRels, raw),
      reference: tags[0] ?? null,
      platform,
    };
  }

  /** The descriptor to take from an index's `manifests`: the host's platform, or the only image. */
  private choose(manifests: Json[], where: string): Record<string, Json> {
    const images = manifests.filter(
      (d): d is Record<string, Json> =>
        isObject(d) &&
        !(isObject(d.annotations) && d.annotations["vnd.docker.reference.type"] === "attestation-manifest") &&
        !(isObject(d.platform) && d.platform.os === "unknown"),
    );
    const arch = hostArchitecture();
    const match = images.find(
      (d) => isObject(d.platform) && d.platform.os === "linux" && d.platform.architecture === arch,
    );
    if (match) return match;
    const only = images.length === 1 ? images[0] : undefined;
    if (only) return only;
    const platforms = images.map((d) =>
      isObject(d.platform) ? `${String(d.platform.os)}/${String(d.platform.architecture)}` : "?",
    );
    throw new ImageArchiveError(
      images.length === 0
        ? `${where} lists no image`
        : `${where} has images for ${platforms.join(", ")} but none for linux/${arch}`,
    );
  }

  async ociLayout(): Promise<Omit<ArchiveAt, "verify">> {
    const index = await this.json("index.json", "index");
    if (!isObject(index) || !Array.isArray(index.manifests) || index.manifests.length === 0) {
      throw new ImageArchiveError("index.json lists no image: not an OCI image layout");
    }
    const first = index.manifests[0] as Json;
    if (!isObject(first)) throw new ImageArchiveError("index.json: its first manifest is not a descriptor");
    let desc: Record<string, Json> = first;
    const annotations = isObject(desc.annotations) ? desc.annotations : {};
    const ref = annotations["io.containerd.image.name"] ?? annotations["org.opencontainers.image.ref.name"];
    let manifest: Json;
    for (let depth = 0; ; depth++) {
      const what = `manifest ${String(desc.digest)}`;
      const doc = await this.json(await this.blob(desc.digest, what), what);
      const isIndex =
        (typeof desc.mediaType === "string" && INDEX_TYPES.has(desc.mediaType)) ||
        (isObject(doc) && Array.isArray(doc.manifests));
      if (!isIndex) {
        manifest = doc;
        break;
      }
      if (depth >= MAX_INDEX_DEPTH) throw new ImageArchiveError("image indexes are nested too deeply");
      if (!isObject(doc) || !Array.isArray(doc.manifests)) throw new ImageArchiveError(`${what} is not an image index`);
      desc = this.choose(doc.manifests, `image index ${String(desc.digest)}`);
    }
    if (
      !isObject(manifest) ||
      !isObject(manifest.config) ||
      !Array.isArray(manifest.layers) ||
      (typeof manifest.mediaType === "string" && !MANIFEST_TYPES.has(manifest.mediaType))
    ) {
      throw new ImageArchiveError(`manifest ${String(desc.digest)} is not an image manifest`);
    }
    const raw = await this.json(await this.blob(manifest.config.digest, "the image config"), "image config");
    const { config, platform } = this.imageConfig(raw);
    const layerRels: string[] = [];
    for (const [i, l] of (manifest.layers as Json[]).entries()) {
      const what = `layer ${i + 1}`;
      if (!isObject(l)) throw new ImageArchiveError(`${what} is not a descriptor`);
      const mediaType = typeof l.mediaType === "string" ? l.mediaType : "";
      if (/zstd/i.test(mediaType)) throw unsupportedCompression(what, "zstd");
      if (mediaType !== "" && !/[.+]tar([.+](gzip|gz))?$/.test(mediaType)) {
        throw new ImageArchiveError(`${what} has media type ${mediaType}, which is not a tar layer`);
      }
      layerRels.push(await this.blob(l.digest, what, true));
    }
    return {
      format: "oci-layout",
      config,
      layers: await this.layers(layerRels, raw),
      reference: typeof ref === "string" ? ref : null,
      platform,
    };
  }
}
