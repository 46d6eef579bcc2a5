import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { pack } from "tar-stream";

/*
 * Builders of tar layers and image archives for the tests of this directory (docker save, legacy
 * and 25+, and OCI image layouts), made in memory: they are small.
 */

export interface TarItem {
  name: string;
  type?: "file" | "directory" | "symlink" | "link" | "fifo" | "character-device" | "block-device";
  data?: string | Buffer;
  mode?: number;
  uid?: number;
  gid?: number;
  linkname?: string;
  mtime?: Date;
  devmajor?: number;
  devminor?: number;
  /** Extra PAX records (e.g. `SCHILY.xattr.user.x`). */
  pax?: Record<string, string>;
}

/** A tar archive of `items`, in order. */
export async function makeTar(items: readonly TarItem[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const c of p) chunks.push(Buffer.from(c as Uint8Array));
  })();
  for (const item of items) {
    const type = item.type ?? "file";
    const data = item.data === undefined ? undefined : Buffer.from(item.data);
    const header = {
      name: item.name,
      type,
      mode: item.mode ?? (type === "directory" ? 0o755 : 0o644),
      uid: item.uid ?? 0,
      gid: item.gid ?? 0,
      mtime: item.mtime ?? new Date(1_700_000_000_000),
      size: data?.length ?? 0,
      ...(item.linkname !== undefined && { linkname: item.linkname }),
      ...(item.devmajor !== undefined && { devmajor: item.devmajor, devminor: item.devminor ?? 0 }),
      ...(item.pax && { pax: item.pax }),
    };
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error | null) => (err ? reject(err) : resolve());
      if (data) p.entry(header, data, done);
      else p.entry(header, done);
    });
  }
  p.finalize();
  await collected;
  return Buffer.concat(chunks);
}

/** A base layer: owners, modes (setuid too), files the upper layer whites out or hides. */
export const lowerLayer = (): Promise<Buffer> =>
  makeTar([
    { name: "./", type: "directory", mode: 0o755 },
    { name: "etc/", type: "directory" },
    { name: "etc/passwd", data: "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n" },
    { name: "etc/old.conf", data: "lower" },
    { name: "home/app/", type: "directory", mode: 0o750, uid: 1000, gid: 1000 },
    { name: "home/app/notes", data: "mine", uid: 1000, gid: 1000 },
    { name: "var/cache/", type: "directory" },
    { name: "var/cache/lower-1", data: "lower" },
    { name: "var/cache/lower-dir/", type: "directory" },
    { name: "var/cache/lower-dir/f", data: "lower" },
    { name: "usr/bin/su", data: "#!/bin/sh\n", mode: 0o4755 },
  ]);
/** A layer over {@link lowerLayer}: a whiteout, an opaque directory, new files. */
export const upperLayer = (): Promise<Buffer> =>
  makeTar([
    { name: "etc/.wh.old.conf", data: "" },
    { name: "var/cache/", type: "directory", mode: 0o700 },
    { name: "var/cache/.wh..wh..opq", data: "" },
    { name: "var/cache/upper", data: "upper" },
    { name: "app/", type: "directory" },
    { name: "app/run.sh", data: "#!/bin/sh\necho hi\n", mode: 0o755 },
  ]);

export function sha256(data: Buffer | string): string {
  return createHash("sha256").update(data).digest("hex");
}

export const gzip = (data: Buffer): Buffer => gzipSync(data);

export interface ImageSpec {
  /** Uncompressed layer tars, first applied first. */
  layers: Buffer[];
  env?: string[];
  workingDir?: string;
  user?: string;
  /** Extra fields of the image config (e.g. `os`). */
  configExtra?: Record<string, unknown>;
}

export function imageConfig(spec: ImageSpec): Buffer {
  return Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: {
        ...(spec.env && { Env: spec.env }),
        ...(spec.workingDir !== undefined && { WorkingDir: spec.workingDir }),
        ...(spec.user !== undefined && { User: spec.user }),
      },
      rootfs: { type: "layers", diff_ids: spec.layers.map((l) => `sha256:${sha256(l)}`) },
      ...spec.configExtra,
    }),
  );
}

/**
 * A legacy `docker save` archive (before 25): `<id>/layer.tar`, `<config sha>.json`, manifest.json.
 * `order`: the layers' files come in this order (indexes into `spec.layers`; the manifest keeps
 * theirs); `first`: files before them, `extra`: after them.
 */
export async function dockerSaveArchive(
  spec: ImageSpec,
  opts: { gzipLayers?: boolean[]; extra?: TarItem[]; first?: TarItem[]; order?: number[] } = {},
): Promise<Buffer> {
  const config = imageConfig(spec);
  const configName = `${sha256(config)}.json`;
  const items: TarItem[] = [...(opts.first ?? [])];
  const ids = spec.layers.map((layer, i) => sha256(`layer ${i} ${sha256(layer)}`));
  const layerNames = ids.map((id) => `${id}/layer.tar`);
  for (const i of opts.order ?? spec.layers.keys()) {
    const id = ids[i] as string;
    const layer = spec.layers[i] as Buffer;
    items.push({ name: `${id}/`, type: "directory" }, { name: `${id}/VERSION`, data: "1.0" });
    items.push({ name: `${id}/layer.tar`, data: opts.gzipLayers?.[i] ? gzip(layer) : layer });
  }
  items.push({ name: configName, data: config });
  items.push(...(opts.extra ?? []));
  items.push({
    name: "manifest.json",
    data: JSON.stringify([{ Config: configName, RepoTags: ["example/app:1.0"], Layers: layerNames }]),
  });
  items.push({ name: "repositories", data: "{}" });
  return makeTar(items);
}

export interface Blob {
  digest: string;
  size: number;
  item: TarItem;
}

export function blob(data: Buffer | string, name?: string): Blob {
  const buf = Buffer.from(data);
  const hex = sha256(buf);
  return { digest: `sha256:${hex}`, size: buf.length, item: { name: name ?? `blobs/sha256/${hex}`, data: buf } };
}

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";

/**
 * An OCI image layout in a tar: layers gzip (or as `layerMediaType` says, stored as `layerData`
 * gives them), an image index with this image for linux/amd64 and a decoy for linux/arm64 unless
 * `singleManifest`.
 */
export async function ociLayoutArchive(
  spec: ImageSpec,
  opts: {
    layerMediaType?: string;
    layerData?: (layer: Buffer, i: number) => Buffer;
    singleManifest?: boolean;
    /** Also a docker 25+ manifest.json naming the same blobs. */
    dockerManifest?: boolean;
    /** Changes the archive's items before it is written (to corrupt it). */
    edit?: (items: TarItem[]) => void;
  } = {},
): Promise<Buffer> {
  const config = blob(imageConfig(spec));
  const layers = spec.layers.map((l, i) => blob(opts.layerData ? opts.layerData(l, i) : gzip(l)));
  const manifest = blob(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: config.digest, size: config.size },
      layers: layers.map((l) => ({ mediaType: opts.layerMediaType ?? OCI_LAYER_GZIP, digest: l.digest, size: l.size })),
    }),
  );
  const items: TarItem[] = [
    { name: "blobs/", type: "directory" },
    { name: "blobs/sha256/", type: "directory" },
    config.item,
    ...layers.map((l) => l.item),
    manifest.item,
  ];
  let top: Blob = manifest;
  let topType = OCI_MANIFEST;
  if (!opts.singleManifest) {
    const decoyConfig = blob(imageConfig({ layers: [], env: ["DECOY=1"] }));
    const decoy = blob(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: decoyConfig.digest, size: 1 },
        layers: [],
      }),
    );
    const index = blob(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [
          {
            mediaType: OCI_MANIFEST,
            digest: decoy.digest,
            size: decoy.size,
            platform: { os: "linux", architecture: "arm64" },
          },
          {
            mediaType: OCI_MANIFEST,
            digest: manifest.digest,
            size: manifest.size,
            platform: { os: "linux", architecture: "amd64" },
          },
          {
            mediaType: OCI_MANIFEST,
            digest: decoy.digest,
            size: decoy.size,
            platform: { os: "unknown", architecture: "unknown" },
            annotations: { "vnd.docker.reference.type": "attestation-manifest" },
          },
        ],
      }),
    );
    items.push(decoyConfig.item, decoy.item, index.item);
    top = index;
    topType = OCI_INDEX;
  }
  items.push({ name: "oci-layout", data: JSON.stringify({ imageLayoutVersion: "1.0.0" }) });
  items.push({
    name: "index.json",
    data: JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [
        {
          mediaType: topType,
          digest: top.digest,
          size: top.size,
          annotations: { "io.containerd.image.name": "docker.io/example/app:2.0" },
        },
      ],
    }),
  });
  if (opts.dockerManifest) {
    items.push({
      name: "manifest.json",
      data: JSON.stringify([
        {
          Config: config.item.name,
          RepoTags: ["example/app:25"],
          Layers: layers.map((l) => l.item.name),
        },
      ]),
    });
  }
  opts.edit?.(items);
  return makeTar(items);
}
