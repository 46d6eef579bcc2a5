import { createHash } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { copyFile, link, lstat, mkdir, open, readdir, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import { ImageArchiveError, quote } from "./errors.js";
import { MAX_SYMLINKS } from "./scoped-path.js";
import { destroyInput, readTar, sniffCompression, type TarEntry, unsupportedCompression } from "./tar-input.js";

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
/** Nested image indexes followed at most. */
const MAX_INDEX_DEPTH = 4;

interface StoredFile {
  /** `sha256:<hex>` (`sha512:<hex>` for files under blobs/sha512/). */
  digest: string;
  size: number;
}

type Link = { kind: "symlink" | "hardlink"; target: string | undefined };

const BLOB_NAME = /^blobs\/(sha256|sha512)\/([0-9a-f]+)$/;
const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;

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

/**
 * Extracts the outer archive into `workDir`: regular files and directories only. Symlinks and hard
 * links between its files (docker save links duplicate layers) become hard links of the files (or
 * copies): no symlink is ever made. Every file is hashed on the way; a blob (`blobs/<alg>/<hex>`)
 * whose content does not match its name is an error.
 */
async function extractArchive(
  input: AsyncIterable<Buffer>,
  workDir: string,
  signal: AbortSignal | undefined,
): Promise<Map<string, StoredFile>> {
  const files = new Map<string, StoredFile>();
  const links = new Map<string, Link>();

  const conflict = (name: string, err: unknown) =>
    new ImageArchiveError(`archive entry ${quote(name)} conflicts with another entry (${errnoCode(err)})`);

  async function makeDir(name: string, rel: string): Promise<void> {
    try {
      await mkdir(join(workDir, rel), { recursive: true });
    } catch (err) {
      if (["EEXIST", "ENOTDIR"].includes(errnoCode(err) ?? "")) throw conflict(name, err);
      throw err;
    }
  }

  async function clear(name: string, rel: string): Promise<void> {
    const path = join(workDir, rel);
    const st = await lstat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err.code === "ENOTDIR" ? conflict(name, err) : err;
    });
    if (st?.isDirectory()) throw new ImageArchiveError(`archive entry ${quote(name)} is also a directory`);
    if (st) await unlink(path);
    files.delete(rel);
    links.delete(rel);
  }

  async function onEntry({ header, body }: TarEntry): Promise<void> {
    const name = header.name;
    if (name.startsWith("/")) throw new ImageArchiveError(`archive entry ${quote(name)} is not a relative path`);
    if (name.includes("\0")) throw new ImageArchiveError(`archive entry ${quote(name)} has a NUL byte in its name`);
    const parts = archiveComponents(name);
    if (parts === undefined) throw new ImageArchiveError(`archive entry ${quote(name)} leaves the archive ('..')`);
    if (parts.length === 0) return; // "./": the archive's top directory
    const rel = parts.join("/");
    switch (header.type) {
      case "directory":
        await makeDir(name, rel);
        return;
      case "file":
      case "contiguous-file": {
        if (parts.length > 1) await makeDir(name, parts.slice(0, -1).join("/"));
        await clear(name, rel);
        const blob = BLOB_NAME.exec(rel);
        const algorithm = blob?.[1] === "sha512" ? "sha512" : "sha256";
        const hash = createHash(algorithm);
        let size = 0;
        const fh = await open(
          join(workDir, rel),
          constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
          0o600,
        ).catch((err: unknown) => {
          throw ["EEXIST", "ENOTDIR", "EISDIR"].includes(errnoCode(err) ?? "") ? conflict(name, err) : err;
        });
        try {
          for await (const chunk of body) {
            signal?.throwIfAborted();
            hash.update(chunk);
            size += chunk.length;
            let off = 0;
            while (off < chunk.length) off += (await fh.write(chunk, off, chunk.length - off)).bytesWritten;
          }
        } finally {
          await fh.close();
        }
        const digest = `${algorithm}:${hash.digest("hex")}`;
        if (blob && digest !== `${blob[1]}:${blob[2]}`) {
          throw new ImageArchiveError(
            `blob ${blob[1]}:${blob[2]} does not match its digest (its content is ${digest}): the archive is corrupt`,
          );
        }
        files.set(rel, { digest, size });
        return;
      }
      case "symlink":
      case "link": {
        await clear(name, rel);
        const linkname = header.linkname ?? "";
        let target: string | undefined;
        if (header.type === "symlink") target = symlinkTarget(rel, linkname);
        else if (!linkname.startsWith("/")) target = archiveComponents(linkname)?.join("/") || undefined;
        links.set(rel, { kind: header.type === "symlink" ? "symlink" : "hardlink", target });
        return;
      }
      default:
        return; // devices, FIFOs: nothing an image archive needs
    }
  }

  await readTar(input, { what: "the archive", onEntry, signal });

  // Links, now that every file is there: each becomes a hard link to (or a copy of) the file it names.
  for (const [rel, l] of links) {
    let target = l.target;
    for (let n = 0; target !== undefined && links.has(target) && n <= MAX_SYMLINKS; n++)
      target = links.get(target)?.target;
    const file = target === undefined ? undefined : files.get(target);
    if (target === undefined || file === undefined) continue; // dangling, a directory or outside: not needed
    const parts = rel.split("/");
    if (parts.length > 1) await makeDir(rel, parts.slice(0, -1).join("/"));
    const from = join(workDir, target);
    const to = join(workDir, rel);
    await link(from, to).catch(async (err: unknown) => {
      if (errnoCode(err) === "EEXIST" || errnoCode(err) === "ENOTDIR") throw conflict(rel, err);
      await copyFile(from, to, constants.COPYFILE_EXCL);
    });
    files.set(rel, file);
  }
  return files;
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
  try {
    const wd = await lstat(workDir);
    if (!wd.isDirectory()) throw new Error(`${workDir} is not a directory`);
    if ((await readdir(workDir)).length > 0) throw new Error(`${workDir} is not empty`);
  } catch (err) {
    destroyInput(archive);
    throw err;
  }
  const input = typeof archive === "string" ? createReadStream(archive) : archive;
  const files = await extractArchive(input as AsyncIterable<Buffer>, workDir, opts.signal);
  const reader = new ArchiveReader(workDir, files);
  if (files.has("manifest.json")) return reader.dockerSave();
  if (files.has("index.json")) return reader.ociLayout();
  throw new ImageArchiveError(
    "archive has no manifest.json or index.json: not a docker save or OCI layout archive (make it with `docker save IMAGE -o FILE.tar`)",
  );
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

class ArchiveReader {
  constructor(
    private readonly workDir: string,
    private readonly files: Map<string, StoredFile>,
  ) {}

  private async json(rel: string, what: string): Promise<Json> {
    const file = this.files.get(rel);
    if (file === undefined) throw new ImageArchiveError(`the archive has no ${what} (${rel})`);
    if (file.size > MAX_JSON_BYTES) throw new ImageArchiveError(`${what} (${rel}) is too large: ${file.size} bytes`);
    const text = await readFile(join(this.workDir, rel), "utf8");
    try {
      return JSON.parse(text) as Json;
    } catch (err) {
      throw new ImageArchiveError(`${what} (${rel}) is not valid JSON: ${(err as Error).message}`);
    }
  }

  /** The file of the blob `digest`, checked against it. */
  private blob(digest: Json, what: string): string {
    if (typeof digest !== "string" || !DIGEST.test(digest)) {
      throw new ImageArchiveError(`${what} has an invalid digest ${quote(String(digest))}`);
    }
    const [alg, hex] = digest.split(":") as [string, string];
    const rel = `blobs/${alg}/${hex}`;
    const file = this.files.get(rel);
    if (file === undefined) throw new ImageArchiveError(`the archive has no blob ${digest} (${what})`);
    if (file.digest !== digest) {
      throw new ImageArchiveError(`blob ${digest} (${what}) does not match its digest: the archive is corrupt`);
    }
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

  private async layer(rel: string, index: number, diffId: string | undefined): Promise<OciLayerRef> {
    const path = join(this.workDir, rel);
    const file = this.files.get(rel) as StoredFile;
    const head = Buffer.alloc(6);
    const fh = await open(path, "r");
    let n: number;
    try {
      n = (await fh.read(head, 0, head.length, 0)).bytesRead;
    } finally {
      await fh.close();
    }
    const compression = sniffCompression(head.subarray(0, n));
    if (compression !== "none" && compression !== "gzip")
      throw unsupportedCompression(`layer ${index + 1}`, compression);
    if (compression === "none" && diffId !== undefined && file.digest !== diffId) {
      throw new ImageArchiveError(
        `layer ${index + 1} (${rel}) does not match its diff_id in the image config (${diffId}): the archive is corrupt`,
      );
    }
    return { path, compression, digest: file.digest, ...(diffId ? { diffId } : {}), size: file.size };
  }

  private async layers(rels: string[], config: Json): Promise<OciLayerRef[]> {
    const rootfs = isObject(config) ? config.rootfs : undefined;
    const diffIds = isObject(rootfs) && Array.isArray(rootfs.diff_ids) ? rootfs.diff_ids : undefined;
    if (diffIds !== undefined && diffIds.length !== rels.length) {
      throw new ImageArchiveError(
        `the image config lists ${diffIds.length} layers (rootfs.diff_ids), its manifest ${rels.length}: the archive is corrupt`,
      );
    }
    const out: OciLayerRef[] = [];
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

  async dockerSave(): Promise<OciArchive> {
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
    if (legacyName && this.files.get(configRel)?.digest !== `sha256:${legacyName[1]}`) {
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

  async ociLayout(): Promise<OciArchive> {
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
      const doc = await this.json(this.blob(desc.digest, what), what);
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
    const raw = await this.json(this.blob(manifest.config.digest, "the image config"), "image config");
    const { config, platform } = this.imageConfig(raw);
    const layerRels = manifest.layers.map((l: Json, i: number) => {
      const what = `layer ${i + 1}`;
      if (!isObject(l)) throw new ImageArchiveError(`${what} is not a descriptor`);
      const mediaType = typeof l.mediaType === "string" ? l.mediaType : "";
      if (/zstd/i.test(mediaType)) throw unsupportedCompression(what, "zstd");
      if (mediaType !== "" && !/[.+]tar([.+](gzip|gz))?$/.test(mediaType)) {
        throw new ImageArchiveError(`${what} has media type ${mediaType}, which is not a tar layer`);
      }
      return this.blob(l.digest, what);
    });
    return {
      format: "oci-layout",
      config,
      layers: await this.layers(layerRels, raw),
      reference: typeof ref === "string" ? ref : null,
      platform,
    };
  }
}
